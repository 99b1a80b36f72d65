// The byte-level tokenizer: each byte of the UTF-8 text is one token (0-255), so encoding is
// lossless for any input and needs no vocabulary file; and the choice of tokenizer by name or by
// a model's vocabulary size.
#include "data/tokenizer.h"

#include "data/gpt2_bpe.h"
#include "deepshard/util/error.h"

namespace deepshard::data {

std::vector<uint16_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<uint16_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& tokens) const {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    DS_CHECK(tokens[i] >= 0 && tokens[i] < kVocabSize, Error, "ByteTokenizer::decode: token ",
             tokens[i], " at index ", i, " is outside the vocabulary (", kVocabSize, ")");
    text[i] = static_cast<char>(tokens[i]);
  }
  return text;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& bpe_dir) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2")
    return std::make_unique<Gpt2Tokenizer>(bpe_dir.empty() ? default_gpt2_bpe_dir() : bpe_dir);
  throw UsageError("unknown tokenizer \"" + name + "\" (byte or gpt2)");
}

std::unique_ptr<Tokenizer> tokenizer_for_vocab(int64_t vocab_size, const std::string& bpe_dir) {
  if (vocab_size == ByteTokenizer::kVocabSize) return make_tokenizer("byte");
  if (vocab_size == Gpt2Tokenizer::kVocabSize) return make_tokenizer("gpt2", bpe_dir);
  throw Error("no tokenizer for a vocabulary of " + std::to_string(vocab_size) +
              " tokens (byte: 256, gpt2: 50257)");
}

}  // namespace deepshard::data
