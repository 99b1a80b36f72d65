// Label files (label_file.h): writing them, and reading them with every line checked, so a bad or
// mismatched file fails before training with the file and the line named.
#include "data/label_file.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/token_file.h"
#include "deepshard/util/error.h"

namespace deepshard::data {
namespace {

constexpr const char* kMagic = "deepshard-labels";
constexpr int kVersion = 1;

// Whitespace-separated words of a line.
std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A non-negative decimal integer, or -1.
int64_t parse_count(const std::string& s) {
  const auto digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), digit)) return -1;
  return std::stoll(s);
}

}  // namespace

std::string label_path_for(const std::string& token_path) {
  const std::string stem =
      token_path.ends_with(".bin") ? token_path.substr(0, token_path.size() - 4) : token_path;
  return stem + ".labels";
}

void write_label_file(const std::string& path, const LabelFile& labels) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  DS_CHECK(!ec, IoError, parent.string(), ": cannot create directory: ", ec.message());
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    DS_CHECK(out.good(), IoError, temp, ": cannot create");
    out << kMagic << ' ' << kVersion << "\ntokens " << labels.tokens << "\nclasses";
    for (const std::string& c : labels.classes) out << ' ' << c;
    out << '\n';
    for (const Passage& p : labels.passages) {
      out << p.start << ' ' << p.length << ' ' << labels.classes.at(size_t(p.label)) << ' '
          << p.document << '\n';
    }
    out.flush();
    DS_CHECK(out.good(), IoError, temp, ": write failed");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw IoError(path + ": cannot rename the temporary file into place");
  }
}

LabelFile read_label_file(const std::string& path) {
  std::ifstream in(path);
  DS_CHECK(std::filesystem::exists(path), IoError, path, ": no such file");
  DS_CHECK(in.good(), IoError, path, ": cannot open");
  LabelFile labels;
  labels.path = path;
  std::string line;
  int64_t number = 0;
  auto where = [&] { return path + ":" + std::to_string(number) + ": "; };
  auto next = [&](const char* what) {
    DS_CHECK(std::getline(in, line), IoError, path, ": ends before its ", what, " line (line ",
             number + 1, ")");
    ++number;
    return words_of(line);
  };
  auto w = next("first");
  DS_CHECK(w.size() == 2 && w[0] == kMagic, IoError, where(),
           "not a deepshard label file (expected \"", kMagic, " ", kVersion, "\")");
  DS_CHECK(w[1] == std::to_string(kVersion), IoError, where(), "unsupported version ", w[1],
           " (this build reads version ", kVersion, ")");
  w = next("tokens");
  DS_CHECK(w.size() == 2 && w[0] == "tokens" && parse_count(w[1]) > 0, IoError, where(),
           "expected \"tokens N\" with N > 0, found \"", line, "\"");
  labels.tokens = parse_count(w[1]);
  w = next("classes");
  DS_CHECK(w.size() >= 3 && w[0] == "classes", IoError, where(),
           "expected \"classes NAME NAME ...\" with at least 2 classes, found \"", line, "\"");
  labels.classes.assign(w.begin() + 1, w.end());
  for (size_t i = 0; i < labels.classes.size(); ++i) {
    const auto first = std::find(labels.classes.begin(), labels.classes.end(), labels.classes[i]);
    DS_CHECK(first == labels.classes.begin() + int64_t(i), IoError, where(), "class \"",
             labels.classes[i], "\" is listed twice");
  }
  while (std::getline(in, line)) {
    ++number;
    w = words_of(line);
    if (w.empty()) continue;
    DS_CHECK(w.size() == 4, IoError, where(), "expected \"START LENGTH CLASS DOCUMENT\", found \"",
             line, "\"");
    Passage p;
    p.start = parse_count(w[0]);
    p.length = parse_count(w[1]);
    DS_CHECK(p.start >= 0, IoError, where(), "start \"", w[0], "\" is not a token index");
    DS_CHECK(p.length >= 1, IoError, where(), "length \"", w[1], "\" is not a positive count");
    DS_CHECK(p.start + p.length <= labels.tokens, IoError, where(), "passage [", p.start, ", ",
             p.start + p.length, ") runs past the ", labels.tokens, " tokens of the token file");
    const auto it = std::find(labels.classes.begin(), labels.classes.end(), w[2]);
    DS_CHECK(it != labels.classes.end(), IoError, where(), "class \"", w[2],
             "\" is not on the classes line");
    p.label = it - labels.classes.begin();
    p.document = w[3];
    labels.passages.push_back(std::move(p));
  }
  DS_CHECK(!labels.passages.empty(), IoError, path, ": no passages");
  return labels;
}

void check_labels_match(const LabelFile& labels, const TokenFile& tokens, int64_t window) {
  DS_CHECK(labels.tokens == tokens.size(), IoError, labels.path, ": describes a token file of ",
           labels.tokens, " tokens, but ", tokens.path(), " has ", tokens.size(),
           " (a label file of other token files?)");
  for (size_t i = 0; i < labels.passages.size(); ++i) {
    const Passage& p = labels.passages[i];
    DS_CHECK(p.length >= window, IoError, labels.path, ": passage ", i + 1, " (document ",
             p.document, ") has ", p.length, " tokens, fewer than the ", window,
             " of a window (model.block_size); prepare the data with --passage-tokens >= ", window);
  }
}

}  // namespace deepshard::data
