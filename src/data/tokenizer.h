// Tokenizers: text <-> token ids. ByteTokenizer (token = byte value, vocabulary 256) needs no
// files; Gpt2Tokenizer (GPT-2's byte-level BPE, vocabulary 50257, data/gpt2_bpe.h) reads
// encoder.json and vocab.bpe. Both are lossless for any byte string.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deepshard::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<uint16_t> encode(std::string_view text) const = 0;
  // Throws Error naming the token when one is outside the vocabulary.
  virtual std::string decode(const std::vector<int64_t>& tokens) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string name() const = 0;  // "byte" or "gpt2": what prepare-data --tokenizer takes
};

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;
  std::vector<uint16_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& tokens) const override;
  int64_t vocab_size() const override { return kVocabSize; }
  std::string name() const override { return "byte"; }
};

// "byte" or "gpt2" (GPT-2's files from `bpe_dir`, "" = default_gpt2_bpe_dir()); UsageError
// naming the choices otherwise.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& bpe_dir = "");

// The tokenizer of a model with this vocabulary: 256 = byte, 50257 = gpt2; Error otherwise.
std::unique_ptr<Tokenizer> tokenizer_for_vocab(int64_t vocab_size, const std::string& bpe_dir = "");

}  // namespace deepshard::data
