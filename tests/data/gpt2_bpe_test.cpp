// GPT-2's BPE (gpt2_bpe.h) against the reference encoder: token ids equal those of the npm package
// gpt-3-encoder 1.1.4's own Encoder.js (run once with node 20 on 2026-11-23, its output written
// below), and decode(encode(s)) == s for any text: prose, code, CJK, emoji, white-space runs,
// random code points and random bytes (invalid UTF-8 included).
#include "data/gpt2_bpe.h"

#include <gtest/gtest.h>

#include <random>

#include "deepshard/util/error.h"

namespace deepshard::data {
namespace gpt2_bpe_test {

const Gpt2Tokenizer& tokenizer() {
  static const Gpt2Tokenizer t;  // third_party/gpt2_bpe of this checkout
  return t;
}

struct Reference {
  std::string text;
  std::vector<uint16_t> ids;
};

// clang-format off
const Reference kReference[] = {
    {"Hello, world!",
     {15496, 11, 995, 0}},
    {"The quick brown fox jumps over the lazy dog.",
     {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}},
    {"I'm sure they'll've done it, haven't they? She'd say it's so. We're here; you've seen.",
     {40, 1101, 1654, 484, 1183, 1053, 1760, 340, 11, 4398, 470, 484, 30, 1375, 1549, 910, 340, 338, 523, 13, 775, 821, 994, 26, 345, 1053, 1775, 13}},
    {"  leading and trailing spaces   ",
     {220, 3756, 290, 25462, 9029, 220, 220, 220}},
    {"tabs\tand\nnewlines\n\n  indented\r\nline",
     {8658, 82, 197, 392, 198, 3605, 6615, 628, 220, 773, 4714, 201, 198, 1370}},
    {"numbers 12345 and 3.14159 and 1,000,000",
     {77, 17024, 17031, 2231, 290, 513, 13, 1415, 19707, 290, 352, 11, 830, 11, 830}},
    {"\xc3\xa9migr\xc3\xa9 na\xc3\xafve caf\xc3\xa9 \xc3\x9cn\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9",
     {2634, 76, 3692, 2634, 41492, 40304, 49363, 77, 26884, 66, 9101, 67, 2634}},
    {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88\xe3\x80\x81\xe4\xb8\xad\xe6\x96\x87\xe6\x96\x87\xe6\x9c\xac\xe3\x80\x82\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xed\x85\x8d\xec\x8a\xa4\xed\x8a\xb8",
     {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 23513, 40792, 23877, 229, 23877, 229, 17312, 105, 16764, 47991, 250, 166, 113, 255, 168, 244, 112, 220, 169, 227, 235, 168, 232, 97, 169, 232, 116}},
    {"emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and \xf0\x9f\x87\xab\xf0\x9f\x87\xb7 flags",
     {368, 31370, 30325, 222, 41840, 235, 8582, 237, 121, 290, 12520, 229, 104, 8582, 229, 115, 9701}},
    {"mixed: foo_bar(baz) -> {x: 1}; // comment",
     {76, 2966, 25, 22944, 62, 5657, 7, 65, 1031, 8, 4613, 1391, 87, 25, 352, 19629, 3373, 2912}},
    {"DeepSpeed ZeRO-3 shards parameters, gradients and optimizer states.",
     {29744, 22785, 9033, 13252, 12, 18, 39991, 10007, 11, 3915, 2334, 290, 6436, 7509, 2585, 13}},
    {"'s 't 're 've 'm 'll 'd 'S 'T",
     {338, 705, 83, 705, 260, 705, 303, 705, 76, 705, 297, 705, 67, 705, 50, 705, 51}},
    {"",
     {}},
    {"   ",
     {220, 220, 220}},
    {"a\xc2\xa0" "b\xe3\x80\x80" "c",
     {64, 1849, 65, 5099, 222, 66}},
    {"<|endoftext|>",
     {27, 91, 437, 1659, 5239, 91, 29}},
    {"antidisestablishmentarianism supercalifragilisticexpialidocious",
     {415, 29207, 44390, 3699, 1042, 2208, 9948, 361, 22562, 346, 396, 501, 42372, 498, 312, 32346}},
};
// clang-format on

TEST(Gpt2Bpe, IdsEqualTheReferenceEncoder) {
  for (const Reference& r : kReference) {
    EXPECT_EQ(tokenizer().encode(r.text), r.ids) << r.text;
    std::vector<int64_t> ids(r.ids.begin(), r.ids.end());
    EXPECT_EQ(tokenizer().decode(ids), r.text);
  }
}

TEST(Gpt2Bpe, VocabularyAndSpecialToken) {
  EXPECT_EQ(tokenizer().vocab_size(), 50257);
  EXPECT_EQ(tokenizer().decode({Gpt2Tokenizer::kEndOfText}), "<|endoftext|>");
  EXPECT_EQ(tokenizer().decode({15496, 11, 995, 0}), "Hello, world!");
  try {
    tokenizer().decode({50257});
    FAIL() << "no error for a token outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 50257 at index 0 is outside the vocabulary"),
              std::string::npos)
        << e.what();
  }
}

TEST(Gpt2Bpe, PretokenizesAsGpt2) {
  using Pieces = std::vector<std::string_view>;
  EXPECT_EQ(Gpt2Tokenizer::pretokenize("Hello, world!  It's 42\n\n  x"),
            Pieces({"Hello", ",", " world", "!", " ", " It", "'s", " 42", "\n\n ", " x"}));
  EXPECT_EQ(Gpt2Tokenizer::pretokenize("a   "), Pieces({"a", "   "}));
  EXPECT_EQ(Gpt2Tokenizer::pretokenize("?'s don't"), Pieces({"?'", "s", " don", "'t"}));
  EXPECT_TRUE(Gpt2Tokenizer::pretokenize("").empty());
}

void expect_round_trip(const std::string& text) {
  const auto ids = tokenizer().encode(text);
  EXPECT_EQ(tokenizer().decode(std::vector<int64_t>(ids.begin(), ids.end())), text);
}

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

TEST(Gpt2Bpe, RoundTripsRandomCodePoints) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(1, 0x10FFFF), ascii(0, 127), len(0, 64);
  std::uniform_int_distribution<int> kind(0, 3);
  for (int n = 0; n < 300; ++n) {
    std::string text;
    for (uint32_t i = 0, l = len(rng); i < l; ++i) {
      char32_t cp = kind(rng) == 0 ? any(rng) : ascii(rng);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // surrogates are not UTF-8
      text += kind(rng) == 1 ? std::string(len(rng) % 5 + 1, ' ') : utf8(cp);
    }
    expect_round_trip(text);
  }
}

TEST(Gpt2Bpe, RoundTripsRandomBytes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 80);
  for (int n = 0; n < 300; ++n) {
    std::string text;
    for (int i = 0, l = len(rng); i < l; ++i) text += static_cast<char>(byte(rng));
    expect_round_trip(text);
  }
  expect_round_trip("\xff\xfe\xc3 \xe2\x82 lone \xed\xa0\x80 surrogate");
}

TEST(Gpt2Bpe, RoundTripsWhiteSpaceRuns) {
  for (const char* text :
       {" ", "\n", "  \t\n\r\n   ", "a \n b", "\xc2\xa0\xc2\xa0x", "\xe3\x80\x80\xe3\x80\x80"}) {
    expect_round_trip(text);
  }
}

TEST(Gpt2Bpe, MissingFilesAreNamed) {
  try {
    Gpt2Tokenizer t("/nonexistent/bpe");
    FAIL() << "no error for a missing folder";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/bpe/encoder.json"), std::string::npos)
        << e.what();
  }
}

}  // namespace gpt2_bpe_test
}  // namespace deepshard::data
