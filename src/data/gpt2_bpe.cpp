// GPT-2's byte-level BPE (gpt2_bpe.h): the files, the pre-tokenisation and the merges.
#include "data/gpt2_bpe.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/unicode_classes.h"
#include "deepshard/util/error.h"

#ifndef DS_GPT2_BPE_DIR
#define DS_GPT2_BPE_DIR "third_party/gpt2_bpe"
#endif

namespace deepshard::data {
namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes for
// the code points 256, 257, ... in byte order. Returns code point -> byte (-1 if none).
std::vector<int> unicode_to_byte() {
  std::vector<int> table(256 + 68, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[printable ? b : next++] = b;
  }
  return table;
}

// A token string of encoder.json / vocab.bpe (each code point one byte) as raw bytes.
std::string token_bytes(std::string_view token, const std::vector<int>& table,
                        const std::string& where) {
  std::string out;
  for (size_t pos = 0; pos < token.size();) {
    size_t length;
    const char32_t cp = unicode::decode_utf8(token, pos, length);
    DS_CHECK(cp < table.size() && table[cp] >= 0, Error, where, ": token \"", token,
             "\" is not in GPT-2's byte alphabet");
    out.push_back(static_cast<char>(table[cp]));
    pos += length;
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in.good(), IoError, path, ": cannot open GPT-2's BPE file (give the folder with ",
           "encoder.json and vocab.bpe)");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

enum class Class { kLetter, kNumber, kSpace, kOther };

Class class_of(char32_t cp) {
  if (cp == unicode::kInvalid) return Class::kOther;
  if (unicode::in(unicode::kLetter, cp)) return Class::kLetter;
  if (unicode::in(unicode::kNumber, cp)) return Class::kNumber;
  if (unicode::in(unicode::kSpace, cp)) return Class::kSpace;
  return Class::kOther;
}

// The contraction matched at `text[pos]` ('s 't 're 've 'm 'll 'd, case-sensitive): its length.
size_t contraction(std::string_view text, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  const char c = text[pos + 1];
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  const std::string_view two = text.substr(pos + 1, 2);
  return two == "re" || two == "ve" || two == "ll" ? 3 : 0;
}

}  // namespace

std::string default_gpt2_bpe_dir() { return DS_GPT2_BPE_DIR; }

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& dir) {
  const std::vector<int> table = unicode_to_byte();
  const std::string encoder_path = dir + "/encoder.json", merges_path = dir + "/vocab.bpe";
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_file(encoder_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(encoder_path + ": not valid JSON: " + e.what());
  }
  DS_CHECK(encoder.is_object() && encoder.size() == kVocabSize, Error, encoder_path,
           ": expected an object of ", kVocabSize, " tokens");
  bytes_of_.resize(kVocabSize);
  std::unordered_map<std::string, int32_t> id_of;
  for (const auto& [token, id] : encoder.items()) {
    DS_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kVocabSize,
             Error, encoder_path, ": token \"", token, "\" has no id in [0, ", kVocabSize, ")");
    const auto i = id.get<int32_t>();
    bytes_of_[i] = i == kEndOfText ? token : token_bytes(token, table, encoder_path);
    id_of[bytes_of_[i]] = i;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(std::string(1, static_cast<char>(b)));
    DS_CHECK(it != id_of.end(), Error, encoder_path, ": byte ", b, " has no token");
    byte_token_[b] = it->second;
  }
  std::istringstream lines(read_file(merges_path));
  std::string line;
  std::getline(lines, line);  // "#version: 0.2"
  int32_t rank = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    DS_CHECK(space != std::string::npos, Error, merges_path, ": merge ", rank + 1,
             " is not two tokens: \"", line, "\"");
    const std::string left = token_bytes(line.substr(0, space), table, merges_path);
    const std::string right = token_bytes(line.substr(space + 1), table, merges_path);
    auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    DS_CHECK(l != id_of.end() && r != id_of.end() && m != id_of.end(), Error, merges_path,
             ": merge ", rank + 1, " (\"", line, "\") names a token encoder.json lacks");
    const uint64_t key = static_cast<uint64_t>(l->second) << 32 | static_cast<uint32_t>(r->second);
    merges_.emplace(key, Merge{rank++, m->second});  // the first (lowest) rank of a pair wins
  }
  DS_CHECK(rank > 0, Error, merges_path, ": no merges");
}

std::vector<std::string_view> Gpt2Tokenizer::pretokenize(std::string_view text) {
  // Code points with their byte offsets and classes (one extra entry marks the end).
  std::vector<size_t> offset;
  std::vector<Class> cls;
  std::vector<char32_t> cps;
  for (size_t pos = 0, length; pos < text.size(); pos += length) {
    const char32_t cp = unicode::decode_utf8(text, pos, length);
    offset.push_back(pos);
    cls.push_back(class_of(cp));
    cps.push_back(cp);
  }
  const size_t n = cps.size();
  offset.push_back(text.size());
  std::vector<std::string_view> pieces;
  auto run_end = [&](size_t k, Class c) {
    while (k < n && cls[k] == c) ++k;
    return k;
  };
  for (size_t k = 0; k < n;) {
    size_t end = k;
    if (const size_t c = contraction(text, offset[k]); c > 0) {
      end = k + c;  // ASCII: one code point per byte
    } else {
      const size_t j = cps[k] == U' ' ? k + 1 : k;  // " ?" then a letter, number or other run
      if (j < n && cls[j] != Class::kSpace) {
        end = run_end(j, cls[j]);
      } else {
        // \s+(?!\S): the white-space run, less its last character when a non-space follows
        // (that one starts the next piece, as " ?X"); else \s+: the whole run.
        const size_t e = run_end(k, Class::kSpace);
        end = (e < n && e - 1 > k) ? e - 1 : e;
      }
    }
    pieces.push_back(text.substr(offset[k], offset[end] - offset[k]));
    k = end;
  }
  return pieces;
}

void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<uint16_t>& out) const {
  std::vector<int32_t> word(piece.size());
  for (size_t i = 0; i < piece.size(); ++i)
    word[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  auto merge_of = [&](int32_t a, int32_t b) -> const Merge* {
    auto it = merges_.find(static_cast<uint64_t>(a) << 32 | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  while (word.size() > 1) {
    const Merge* best = nullptr;
    int32_t first = 0, second = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const Merge* m = merge_of(word[i], word[i + 1]);
      if (m && (!best || m->rank < best->rank)) best = m, first = word[i], second = word[i + 1];
    }
    if (!best) break;
    // Every occurrence of the pair, left to right, becomes the merged token.
    size_t w = 0;
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        word[w++] = best->merged;
        ++i;
      } else {
        word[w++] = word[i];
      }
    }
    word.resize(w);
  }
  out.insert(out.end(), word.begin(), word.end());
}

std::vector<uint16_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<uint16_t> out;
  out.reserve(text.size() / 3);
  for (std::string_view piece : pretokenize(text)) bpe(piece, out);
  return out;
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& tokens) const {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    DS_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size(), Error, "Gpt2Tokenizer::decode: token ",
             tokens[i], " at index ", i, " is outside the vocabulary (", vocab_size(), ")");
    text += bytes_of_[tokens[i]];
  }
  return text;
}

}  // namespace deepshard::data
