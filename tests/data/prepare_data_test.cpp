// Tests of prepare_data: document order, split sizes (by documents, or by tokens for a single
// document), the contents of both token files, and its errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/corpus.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::data {
namespace prepare_data_test {

using testing::TempDir;
using testing::write_file;

std::string decode_file(const std::string& path) {
  TokenFile file(path);
  std::vector<int64_t> tokens(file.size());
  file.read(0, file.size(), tokens.data());
  return ByteTokenizer().decode(tokens);
}

// Documents "doc NN: ..." of different lengths in dir/docs, created out of order.
std::vector<std::string> make_docs(const TempDir& dir, int n) {
  std::filesystem::create_directories(dir.file("docs/nested"));
  std::vector<std::string> texts(n);
  for (int i = n - 1; i >= 0; --i) {
    char name[16];
    std::snprintf(name, sizeof name, "d%02d.txt", i);
    texts[i] = "doc " + std::to_string(i) + ": " + std::string(10 + 7 * i, 'a' + i % 26);
    // The last two live in a sub-folder whose name sorts after the files.
    std::string path = i >= n - 2 ? dir.file("docs/nested/") + name : dir.file("docs/") + name;
    write_file(path, texts[i]);
  }
  write_file(dir.file("docs/.hidden"), "not a document");
  return texts;
}

// The documents of `texts` at `indices`, joined by newlines.
std::string join(const std::vector<std::string>& texts, const std::vector<size_t>& indices) {
  std::string out;
  for (size_t k = 0; k < indices.size(); ++k) out += (k > 0 ? "\n" : "") + texts[indices[k]];
  return out;
}

TEST(PrepareData, SpreadsTheValidationDocumentsEvenly) {
  TempDir dir;
  auto texts = make_docs(dir, 10);
  PrepareOptions options{{dir.file("docs")}, dir.file("out/train.bin"), "", 0.2, "byte", ""};
  PrepareSummary s = prepare_data(options);
  EXPECT_EQ(s.documents, 10);
  EXPECT_EQ(s.train_documents, 8);
  EXPECT_EQ(s.valid_documents, 2);
  EXPECT_EQ(s.train_path, dir.file("out/train.bin"));
  EXPECT_EQ(s.valid_path, dir.file("out/train.valid.bin"));  // the default name
  // Every fifth document validates: 4 and 9.
  const std::string train = join(texts, {0, 1, 2, 3, 5, 6, 7, 8});
  const std::string valid = join(texts, {4, 9});
  EXPECT_EQ(decode_file(s.train_path), train);
  EXPECT_EQ(decode_file(s.valid_path), valid);
  EXPECT_EQ(s.train_tokens, static_cast<int64_t>(train.size()));
  EXPECT_EQ(s.valid_tokens, static_cast<int64_t>(valid.size()));
  EXPECT_EQ(TokenFile(s.train_path).vocab_size(), 256);
}

TEST(PrepareData, KeepsAtLeastOneDocumentInEachSplit) {
  TempDir dir;
  auto texts = make_docs(dir, 3);
  PrepareSummary few = prepare_data({{dir.file("docs")}, dir.file("a.bin"), "", 0.01, "byte", ""});
  EXPECT_EQ(few.train_documents, 2);
  EXPECT_EQ(few.valid_documents, 1);
  PrepareSummary many = prepare_data(
      {{dir.file("docs")}, dir.file("b.bin"), dir.file("b_valid.bin"), 0.99, "byte", ""});
  EXPECT_EQ(many.train_documents, 1);
  EXPECT_EQ(many.valid_documents, 2);
  EXPECT_EQ(decode_file(dir.file("b_valid.bin")), join(texts, {1, 2}));
}

TEST(PrepareData, FilesKeepCommandLineOrder) {
  TempDir dir;
  write_file(dir.file("z.txt"), "zzz");
  write_file(dir.file("a.txt"), "aaa");
  write_file(dir.file("m.txt"), "mmm");
  PrepareSummary s = prepare_data({{dir.file("z.txt"), dir.file("a.txt"), dir.file("m.txt")},
                                   dir.file("o.bin"),
                                   "",
                                   0.3,
                                   "byte",
                                   ""});
  EXPECT_EQ(decode_file(dir.file("o.bin")), "zzz\naaa");
  EXPECT_EQ(decode_file(dir.file("o.valid.bin")), "mmm");
  EXPECT_EQ(s.documents, 3);
}

TEST(PrepareData, SplitsASingleDocumentByTokens) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + i % 26);
  write_file(dir.file("one.txt"), text);
  PrepareSummary s =
      prepare_data({{dir.file("one.txt")}, dir.file("one.bin"), "", 0.1, "byte", ""});
  EXPECT_EQ(s.documents, 1);
  EXPECT_EQ(s.train_tokens, 900);
  EXPECT_EQ(s.valid_tokens, 100);
  EXPECT_EQ(decode_file(s.train_path) + decode_file(s.valid_path), text);
}

TEST(PrepareData, StripsBrownFiles) {
  TempDir dir;
  write_file(dir.file("ca01"),
             "\n\n\tThe/at jury/nn said/vbd ,/, ``/`` considering/in the/at widespread/jj "
             "interest/nn ''/'' ./.\n\n");
  write_file(dir.file("ca02"), "\n\n\tIt/pps recommended/vbd that/cs Fulton/np act/vb ./.\n");
  PrepareSummary s =
      prepare_data({{dir.file("ca01"), dir.file("ca02")}, dir.file("b.bin"), "", 0.5, "byte", ""});
  EXPECT_EQ(decode_file(s.train_path), "The jury said, \"considering the widespread interest\".");
  EXPECT_EQ(decode_file(s.valid_path), "It recommended that Fulton act.");
}

TEST(PrepareData, Errors) {
  TempDir dir;
  write_file(dir.file("a.txt"), "some text");
  try {
    prepare_data(
        {{dir.file("a.txt"), dir.file("missing.txt")}, dir.file("o.bin"), "", 0.1, "byte", ""});
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("missing.txt") + ": no such file");
  }
  std::filesystem::create_directories(dir.file("empty_dir"));
  EXPECT_THROW(prepare_data({{dir.file("empty_dir")}, dir.file("o.bin"), "", 0.1, "byte", ""}),
               IoError);
  EXPECT_THROW(prepare_data({{dir.file("a.txt")}, dir.file("o.bin"), "", 0.0, "byte", ""}),
               UsageError);
  EXPECT_THROW(prepare_data({{dir.file("a.txt")}, dir.file("o.bin"), "", 1.0, "byte", ""}),
               UsageError);
  EXPECT_THROW(prepare_data({{}, dir.file("o.bin"), "", 0.1, "byte", ""}), UsageError);
  EXPECT_THROW(
      prepare_data({{dir.file("a.txt")}, dir.file("o.bin"), dir.file("o.bin"), 0.1, "byte", ""}),
      UsageError);
  write_file(dir.file("x.txt"), "x");
  EXPECT_THROW(prepare_data({{dir.file("x.txt")}, dir.file("o.bin"), "", 0.5, "byte", ""}),
               IoError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.bin")));  // nothing written on failure
}

}  // namespace prepare_data_test
}  // namespace deepshard::data
