// Tests of the byte-level tokenizer.
#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include "deepshard/util/error.h"

namespace deepshard::data {
namespace tokenizer_test {

TEST(ByteTokenizer, EncodesBytesAndDecodesLosslessly) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  const std::string text = "Jury said \"no\"\n\xc3\xa9t\xc3\xa9 \x01\xff";  // UTF-8 and raw bytes
  std::vector<uint16_t> tokens = tok.encode(text);
  ASSERT_EQ(tokens.size(), text.size());
  EXPECT_EQ(tokens[0], 'J');
  EXPECT_EQ(tokens[15], 0xc3);
  EXPECT_EQ(tokens.back(), 255);
  EXPECT_EQ(tok.decode(std::vector<int64_t>(tokens.begin(), tokens.end())), text);
}

TEST(ByteTokenizer, DecodeRejectsTokensOutsideTheVocabulary) {
  ByteTokenizer tok;
  EXPECT_THROW(tok.decode({65, 256}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
}

}  // namespace tokenizer_test
}  // namespace deepshard::data
