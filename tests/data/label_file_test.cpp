// Label files and `prepare-data --labels brown-genre`: passages of each document labelled with the
// genre of its Brown name, the split by document (no document on both sides), the round trip of
// the format, the sampler's windows inside passages, and the errors of bad or mismatched files
// (each naming the file and the line or passage).
#include "data/label_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "data/corpus.h"
#include "data/sampler.h"
#include "data/token_file.h"
#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::data {
namespace label_file_test {

using testing::read_file;
using testing::run_deepshard;
using testing::TempDir;
using testing::write_file;

// The IoError message of `fn`, "" when it throws none.
template <typename F>
std::string io_error_of(F&& fn) {
  try {
    fn();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(BrownGenre, FromTheFileName) {
  ASSERT_EQ(brown_genres().size(), 15u);
  EXPECT_EQ(brown_genres()[size_t(brown_genre_of("x/ca01"))], "news");
  EXPECT_EQ(brown_genres()[size_t(brown_genre_of("cj80"))], "learned");
  EXPECT_EQ(brown_genres()[size_t(brown_genre_of("/data/cr09"))], "humor");
  EXPECT_EQ(brown_genre_of("cp29"), 13);
  for (const char* bad : {"ci01", "cq01", "cs01", "ca1", "da01", "ca01.txt", "README"})
    EXPECT_NE(io_error_of([&] { brown_genre_of(bad); }).find(std::string(bad) + ": not a Brown"),
              std::string::npos)
        << bad;
}

// 8 documents of 2 genres; passages of 40 bytes; validation every 4th document (2 of 8).
TEST(LabelledPrepareData, PassagesLabelledAndSplitByDocument) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("docs"));
  const std::vector<std::string> names = {"ca01", "ca02", "ca03", "ca04",
                                          "cb01", "cb02", "cb03", "cb04"};
  for (size_t i = 0; i < names.size(); ++i)
    write_file(dir.file("docs/" + names[i]), std::string(100 + 10 * i, char('a' + i)));
  auto r = run_deepshard({"prepare-data", dir.file("docs"), "-o", dir.file("g.bin"), "--labels",
                          "brown-genre", "--passage-tokens", "40", "--valid-fraction", "0.25"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("labels: brown-genre, 15 classes, passages of 40 tokens"),
            std::string::npos)
      << r.output;
  const LabelFile train = read_label_file(dir.file("g.labels"));
  const LabelFile valid = read_label_file(dir.file("g.valid.labels"));
  TokenFile train_tokens(dir.file("g.bin")), valid_tokens(dir.file("g.valid.bin"));
  check_labels_match(train, train_tokens, 40);
  check_labels_match(valid, valid_tokens, 40);
  EXPECT_EQ(train.classes, brown_genres());
  std::set<std::string> train_docs, valid_docs;
  for (const Passage& p : train.passages) {
    train_docs.insert(p.document);
    EXPECT_EQ(p.length, 40);
    EXPECT_EQ(p.label, p.document[1] == 'a' ? 0 : 1) << p.document;
    // Every token of the passage is its document's letter.
    for (int64_t t = p.start; t < p.start + p.length; ++t)
      ASSERT_EQ(train_tokens.token(t),
                'a' + (std::find(names.begin(), names.end(), p.document) - names.begin()))
          << p.document;
  }
  for (const Passage& p : valid.passages) valid_docs.insert(p.document);
  EXPECT_EQ(valid_docs, (std::set<std::string>{"ca04", "cb04"}));
  EXPECT_EQ(train_docs.size(), 6u);
  for (const std::string& d : valid_docs) EXPECT_EQ(train_docs.count(d), 0u) << d;
  // Document i has 100 + 10 i bytes: floor(/ 40) passages (the rest left out).
  EXPECT_EQ(valid.passages.size(), size_t(130 / 40 + 170 / 40));
  EXPECT_NE(r.output.find("valid labels: " + dir.file("g.valid.labels") + ": 7 passages"),
            std::string::npos)
      << r.output;

  auto unnamed = run_deepshard({"prepare-data", dir.file("docs"), dir.file("docs/../g.bin"), "-o",
                                dir.file("h.bin"), "--labels", "brown-genre"});
  EXPECT_EQ(unnamed.exit_status, 1);
  EXPECT_NE(unnamed.output.find("g.bin: not a Brown corpus text name"), std::string::npos)
      << unnamed.output;
  auto unknown = run_deepshard(
      {"prepare-data", dir.file("docs"), "-o", dir.file("h.bin"), "--labels", "topic"});
  EXPECT_NE(unknown.exit_status, 0);
  EXPECT_NE(unknown.output.find("unknown labels \"topic\" (known: brown-genre)"), std::string::npos)
      << unknown.output;
}

TEST(LabelFile, RoundTripAndTheSamplersWindows) {
  TempDir dir;
  std::vector<uint16_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t(i);
  write_token_file(dir.file("t.bin"), tokens, 256);
  LabelFile labels;
  labels.tokens = 100;
  labels.classes = {"x", "y", "z"};
  labels.passages = {{0, 30, 2, "d0"}, {40, 20, 0, "d1"}, {70, 30, 1, "d2"}};
  write_label_file(label_path_for(dir.file("t.bin")), labels);
  const LabelFile back = read_label_file(dir.file("t.labels"));
  EXPECT_EQ(back.classes, labels.classes);
  ASSERT_EQ(back.passages.size(), 3u);
  EXPECT_EQ(back.passages[1].start, 40);
  EXPECT_EQ(back.passages[2].label, 1);
  EXPECT_EQ(back.passages[2].document, "d2");

  TokenFile file(dir.file("t.bin"));
  DistributedSampler sampler(file, 16, 4, 1, 0, 1, 7);
  sampler.set_passages(&back);
  for (int64_t step = 0; step < 20; ++step) {
    const Batch b = sampler.batch(step, 0);
    ASSERT_EQ(b.targets.sizes(), (std::vector<int64_t>{4}));
    for (int64_t p = 0; p < 4; ++p) {
      const int64_t first = b.inputs[p][0].item<int64_t>();
      const Passage& in = *std::find_if(back.passages.begin(), back.passages.end(), [&](auto& q) {
        return first >= q.start && first + 16 <= q.start + q.length;
      });
      EXPECT_EQ(b.targets[p].item<int64_t>(), in.label) << "step " << step;
      EXPECT_EQ(b.inputs[p][15].item<int64_t>(), first + 15);
    }
  }
  // The global batch of a step does not depend on the split over ranks.
  DistributedSampler rank1(file, 16, 2, 1, 1, 2, 7);
  rank1.set_passages(&back);
  EXPECT_TRUE(rank1.batch(3, 0).inputs.equal(sampler.batch(3, 0).inputs.narrow(0, 2, 2)));
  // A window longer than a passage.
  EXPECT_NE(io_error_of([&] {
              check_labels_match(back, file, 25);
            }).find("t.labels: passage 2 (document d1) has 20 tokens, fewer than the 25"),
            std::string::npos);
}

TEST(LabelFile, BadOrMismatchedFilesNameTheFileAndLine) {
  TempDir dir;
  const std::string path = dir.file("bad.labels");
  auto error_of = [&](const std::string& text) {
    write_file(path, text);
    return io_error_of([&] { read_label_file(path); });
  };
  const std::string head = "deepshard-labels 1\ntokens 50\nclasses a b\n";
  EXPECT_NE(error_of("hello\n").find(path + ":1: not a deepshard label file"), std::string::npos);
  EXPECT_NE(error_of("deepshard-labels 2\n").find(path + ":1: unsupported version 2"),
            std::string::npos);
  EXPECT_NE(error_of("deepshard-labels 1\ntokens x\n").find(path + ":2: expected \"tokens N\""),
            std::string::npos);
  EXPECT_NE(error_of("deepshard-labels 1\ntokens 5\nclasses a\n").find(path + ":3: expected"),
            std::string::npos);
  EXPECT_NE(error_of("deepshard-labels 1\ntokens 5\nclasses a a\n")
                .find(path + ":3: class \"a\" is listed twice"),
            std::string::npos);
  EXPECT_NE(error_of(head + "0 10 a d\n0 10 c d\n").find(path + ":5: class \"c\" is not on"),
            std::string::npos);
  EXPECT_NE(error_of(head + "45 10 a d\n").find(path + ":4: passage [45, 55) runs past the 50"),
            std::string::npos);
  EXPECT_NE(error_of(head + "0 0 a d\n").find(path + ":4: length \"0\" is not a positive"),
            std::string::npos);
  EXPECT_NE(error_of(head + "-1 3 a d\n").find(path + ":4: start \"-1\" is not a token index"),
            std::string::npos);
  EXPECT_NE(error_of(head + "0 3 a\n").find(path + ":4: expected \"START LENGTH CLASS DOCUMENT\""),
            std::string::npos);
  EXPECT_NE(error_of(head).find(path + ": no passages"), std::string::npos);
  EXPECT_NE(error_of("deepshard-labels 1\n").find(path + ": ends before its tokens line"),
            std::string::npos);
  EXPECT_NE(io_error_of([&] { read_label_file(dir.file("none.labels")); }).find("no such file"),
            std::string::npos);
  // Labels of another token file.
  write_token_file(dir.file("t.bin"), std::vector<uint16_t>(40, 1), 256);
  write_file(path, head + "0 10 a d\n");
  EXPECT_NE(
      io_error_of([&] {
        check_labels_match(read_label_file(path), TokenFile(dir.file("t.bin")), 8);
      }).find(path + ": describes a token file of 50 tokens, but " + dir.file("t.bin") + " has 40"),
      std::string::npos);
}

}  // namespace label_file_test
}  // namespace deepshard::data
