// Reading input text for prepare-data: plain files as they are, and Brown corpus files (form C,
// "word/tag" tokens, one sentence per line, paragraphs between blank lines) turned back into
// ordinary prose: tags dropped, punctuation and quotes re-attached, headlines on their own line.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "data/corpus.h"
#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::data {
namespace {

// Every character that occurs in a Brown tag ("nn-tl", "ppss+md", "``", ".-hl", "*").
constexpr std::string_view kTagChars = "abcdefghijklmnopqrstuvwxyz$*+.,:()'`-";

struct Tagged {
  std::string_view word, tag;  // tag is empty when the token has no '/'
};

Tagged split_tag(std::string_view token) {
  size_t slash = token.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return {token, {}};
  return {token.substr(0, slash), token.substr(slash + 1)};
}

bool is_tag(std::string_view tag) {
  return !tag.empty() && tag.find_first_not_of(kTagChars) == std::string_view::npos;
}

std::vector<std::string_view> split_whitespace(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

// A Brown file: at least 90 % of its first (up to) 200 tokens, and at least 4, are "word/tag".
bool looks_like_brown(std::string_view text) {
  constexpr size_t kSample = 200, kMinTokens = 4;
  std::vector<std::string_view> tokens = split_whitespace(text.substr(0, 8 * 1024));
  if (tokens.size() > kSample) tokens.resize(kSample);
  size_t tagged = std::count_if(tokens.begin(), tokens.end(),
                                [](std::string_view t) { return is_tag(split_tag(t).tag); });
  return tagged >= kMinTokens && tagged * 10 >= tokens.size() * 9;
}

// A headline line: most of its tokens carry a "-hl" tag.
bool is_headline(const std::vector<std::string_view>& tokens) {
  size_t hl = std::count_if(tokens.begin(), tokens.end(), [](std::string_view t) {
    return split_tag(t).tag.find("-hl") != std::string_view::npos;
  });
  return hl * 2 > tokens.size();
}

// Joins the words of one paragraph with prose spacing.
class ProseWriter {
 public:
  void add(std::string_view word) {
    // Brown ends a sentence with its own mark after one already written: after an abbreviation
    // ("Jr./np ./.") and as a doubled "?/. ?/.", ";/. ;/.", "!/. !/.". Print the mark once.
    if (word.size() == 1 && std::string_view(".;:?!").find(word[0]) != std::string_view::npos &&
        !text_.empty() && text_.back() == word[0])
      return;
    bool single_quote = word == "'";
    bool closing = word == "," || word == "." || word == ";" || word == ":" || word == "!" ||
                   word == "?" || word == ")" || word == "]" || word == "''" ||
                   (single_quote && single_open_);
    bool opening = word == "``" || word == "(" || word == "[" || (single_quote && !single_open_);
    if (!text_.empty() && !glue_next_ && !closing && text_.back() != '\n') text_ += ' ';
    text_ += (word == "``" || word == "''") ? std::string_view("\"") : word;
    glue_next_ = opening;
    if (single_quote) single_open_ = !single_open_;
  }
  void line_break() {
    text_ += '\n';
    glue_next_ = false;
  }
  std::string take() {
    while (!text_.empty() && text_.back() == '\n') text_.pop_back();
    std::string out = std::move(text_);
    *this = ProseWriter();
    return out;
  }

 private:
  std::string text_;
  bool glue_next_ = false;    // the previous word opens (a quote or bracket): no space after it
  bool single_open_ = false;  // Brown's ' is both the opening and the closing single quote
};

}  // namespace

std::string strip_brown_tags(const std::string& tagged) {
  std::vector<std::string> paragraphs;
  ProseWriter writer;
  auto end_paragraph = [&] {
    std::string p = writer.take();
    if (!p.empty()) paragraphs.push_back(std::move(p));
  };
  for (const std::string& line : strings::split(tagged, '\n')) {
    std::vector<std::string_view> tokens = split_whitespace(line);
    if (tokens.empty()) {
      end_paragraph();
      continue;
    }
    for (std::string_view token : tokens) writer.add(split_tag(token).word);
    if (is_headline(tokens)) writer.line_break();
  }
  end_paragraph();
  std::string out;
  for (size_t i = 0; i < paragraphs.size(); ++i) {
    if (i > 0) out += '\n';
    out += paragraphs[i];
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  DS_CHECK(std::filesystem::exists(status), IoError, path, ": no such file");
  DS_CHECK(!std::filesystem::is_directory(status), IoError, path,
           ": is a directory (expected a text file)");
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in, IoError, path, ": cannot open for reading");
  std::ostringstream content;
  content << in.rdbuf();
  DS_CHECK(!in.bad(), IoError, path, ": read failed");
  std::string text = std::move(content).str();
  DS_CHECK(!text.empty(), IoError, path, ": empty");
  if (!looks_like_brown(text)) return text;
  std::string prose = strip_brown_tags(text);
  DS_CHECK(!prose.empty(), IoError, path, ": a Brown corpus file with no words");
  return prose;
}

}  // namespace deepshard::data
