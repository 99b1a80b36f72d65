// CheckpointReader on hand-made checkpoints: ranges assembled across records and files, coverage
// checks (gaps, overlaps, foreign records), manifest and header consistency.
#include "deepshard/checkpoint/engine_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::checkpoint {
namespace engine_checkpoint_test {

namespace fs = std::filesystem;

class EngineCheckpointTest : public ::testing::Test {
 protected:
  // w: [2, 5] and b: [3], values 0..9 and 100..102 (fp32), moments = value + 1000 / + 2000.
  nlohmann::json manifest(int world) const {
    return {{"format_version", kCheckpointFormatVersion},
            {"world_size", world},
            {"zero_stage", 1},
            {"parameters",
             {{{"name", "w"}, {"shape", {2, 5}}, {"dtype", "float32"}},
              {{"name", "b"}, {"shape", {3}}, {"dtype", "bfloat16"}}}},
            {"client_state", {{"step", 7}}}};
  }
  static std::vector<StateRecord> records(const std::string& name, int64_t begin, int64_t end) {
    const double base = name == "w" ? 0 : 100;
    std::vector<StateRecord> out;
    for (StateKind kind : kStateKinds) {
      const double offset = kind == StateKind::kFp32 ? 0 : kind == StateKind::kExpAvg ? 1000 : 2000;
      out.push_back({name, begin, end, kind,
                     torch::arange(base + offset + begin, base + offset + end, torch::kFloat)});
    }
    return out;
  }
  static std::vector<StateRecord> join(std::vector<StateRecord> a,
                                       const std::vector<StateRecord>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  void write(int world, const std::vector<std::vector<StateRecord>>& per_rank) const {
    fs::create_directories(dir_);
    write_manifest(dir_, manifest(world));
    for (size_t r = 0; r < per_rank.size(); ++r)
      write_rank_shard(dir_, static_cast<int>(r), world, per_rank[r]);
  }
  std::string open_error() const {
    try {
      CheckpointReader reader(dir_);
    } catch (const IoError& e) {
      return e.what();
    }
    return "no IoError";
  }

  testing::TempDir tmp_;
  std::string dir_ = tmp_.file("step7");
};

TEST_F(EngineCheckpointTest, AssemblesRangesAcrossFiles) {
  write(2, {join(records("w", 0, 4), records("b", 0, 3)), records("w", 4, 10)});
  CheckpointReader reader(dir_);
  EXPECT_EQ(reader.world_size(), 2);
  EXPECT_EQ(reader.client_state().at("step"), 7);
  EXPECT_TRUE(torch::equal(reader.read_range("w", StateKind::kFp32, 2, 7),
                           torch::arange(2, 7, torch::kFloat)));
  EXPECT_TRUE(torch::equal(reader.read_range("w", StateKind::kExpAvgSq, 3, 5),
                           torch::arange(2003, 2005, torch::kFloat)));
  const auto weights = reader.consolidated_weights();
  EXPECT_TRUE(torch::equal(weights.at("w"), torch::arange(0, 10, torch::kFloat).view({2, 5})));
  EXPECT_TRUE(torch::equal(weights.at("b"), torch::arange(100, 103, torch::kFloat)));
  EXPECT_THROW(reader.read_range("w", StateKind::kFp32, 8, 11), IoError);
  EXPECT_THROW(reader.read_range("x", StateKind::kFp32, 0, 1), IoError);
}

TEST_F(EngineCheckpointTest, GapsOverlapsAndForeignRecordsAreReported) {
  write(2, {join(records("w", 0, 4), records("b", 0, 3)), records("w", 5, 10)});
  EXPECT_NE(open_error().find("'w' (fp32): elements from 4 are missing"), std::string::npos)
      << open_error();
  write(2, {join(records("w", 0, 5), records("b", 0, 3)), records("w", 4, 10)});
  EXPECT_NE(open_error().find("elements from 5 are held twice"), std::string::npos) << open_error();
  write(2, {join(records("w", 0, 4), records("b", 0, 2)), records("w", 4, 10)});
  EXPECT_NE(open_error().find("'b' (fp32) has 2 elements in the shard files"), std::string::npos)
      << open_error();
  write(2, {join(records("w", 0, 4), records("b", 0, 3)),
            join(records("w", 4, 10), records("c", 0, 1))});
  EXPECT_NE(open_error().find("rank_00001: records of 'c', which is not in the manifest"),
            std::string::npos)
      << open_error();
}

TEST_F(EngineCheckpointTest, FilesMustMatchTheManifest) {
  write(2, {join(records("w", 0, 10), records("b", 0, 3)), {}});
  EXPECT_NO_THROW(CheckpointReader reader(dir_));
  fs::remove(dir_ + "/rank_00001");
  EXPECT_NE(open_error().find(dir_ + "/rank_00001: missing shard file"), std::string::npos)
      << open_error();
  write_rank_shard(dir_, 1, 3, {});  // a file of another save
  EXPECT_NE(open_error().find("its header says rank 1 of 3, the manifest expects rank 1 of 2"),
            std::string::npos)
      << open_error();
  fs::remove(dir_ + "/manifest.json");
  EXPECT_NE(open_error().find("manifest.json: missing"), std::string::npos) << open_error();
  testing::write_file(dir_ + "/manifest.json", "{\"format_version\": 1, \"world");
  EXPECT_NE(open_error().find("manifest.json: corrupt manifest"), std::string::npos)
      << open_error();
}

TEST_F(EngineCheckpointTest, RecordNames) {
  EXPECT_EQ(record_name("h.0.attn.c_attn.weight", 0, 4096, StateKind::kExpAvg),
            "h.0.attn.c_attn.weight[0:4096]/exp_avg");
  EXPECT_EQ(shard_file_name(3), "rank_00003");
}

}  // namespace engine_checkpoint_test
}  // namespace deepshard::checkpoint
