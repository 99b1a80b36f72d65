// whole_ranges / whole_shape (tensor_slice.h) against slices cut with torch: rows, columns and
// GPT's q/k/v rows (3 blocks) for tensor sizes 1, 2 and 4, every rank, every sub-range of the
// slice's flattened elements; and a tensor-parallel save's records read back through
// CheckpointReader::read_ranges into another tensor size.
#include "deepshard/checkpoint/tensor_slice.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <numeric>

#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::checkpoint {
namespace tensor_slice_test {

// Rank `slice.rank`'s slice of `whole`, cut as the tensor-parallel models cut it.
at::Tensor cut(const at::Tensor& whole, const TensorSlice& slice) {
  if (!slice.split()) return whole;
  std::vector<at::Tensor> parts;
  for (const at::Tensor& block : whole.chunk(slice.blocks, slice.dim))
    parts.push_back(block.chunk(slice.size, slice.dim)[slice.rank]);
  return at::cat(parts, slice.dim).contiguous();
}

// The whole parameter's elements at `ranges`, concatenated.
at::Tensor gather(const at::Tensor& whole, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<at::Tensor> parts;
  for (const auto& [b, e] : ranges) parts.push_back(whole.reshape({-1}).slice(0, b, e));
  return parts.empty() ? at::empty({0}) : at::cat(parts);
}

TEST(TensorSlice, RangesHoldTheSliceElements) {
  struct Case {
    std::vector<int64_t> shape;
    int dim, blocks;
  };
  for (const Case& c :
       {Case{{8, 4}, 0, 1}, Case{{12, 4}, 0, 3}, Case{{4, 8}, 1, 1}, Case{{24}, 0, 3},
        Case{{8}, 0, 1}, Case{{2, 8, 3}, 1, 2}, Case{{5, 3}, -1, 1}}) {
    const at::Tensor whole = torch::arange(std::accumulate(c.shape.begin(), c.shape.end(),
                                                           int64_t{1}, std::multiplies<>()),
                                           torch::kFloat)
                                 .view(c.shape);
    for (int size : {1, 2, 4}) {
      if (c.dim >= 0 && c.shape[c.dim] % (c.blocks * size) != 0) continue;
      for (int rank = 0; rank < size; ++rank) {
        const TensorSlice slice{c.dim, c.blocks, rank, size};
        const at::Tensor local = cut(whole, slice).reshape({-1});
        EXPECT_EQ(whole_shape(cut(whole, slice).sizes().vec(), slice), c.shape);
        const int64_t n = local.numel();
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t e = b + 1; e <= n; ++e) {
            const auto ranges = whole_ranges(c.shape, slice, b, e);
            ASSERT_TRUE(torch::equal(gather(whole, ranges), local.slice(0, b, e)))
                << "dim " << c.dim << " blocks " << c.blocks << " rank " << rank << " of " << size
                << " [" << b << ":" << e << ")";
            for (size_t i = 1; i < ranges.size(); ++i)
              ASSERT_LT(ranges[i - 1].second, ranges[i].first) << "not increasing, or unmerged";
          }
        }
      }
    }
  }
}

TEST(TensorSlice, RowsOfColumnSlicesAreSeparateRanges) {
  // [4, 8] split by columns over 2: rank 1 holds columns 4..7 of every row.
  const auto ranges = whole_ranges({4, 8}, TensorSlice{1, 1, 1, 2}, 0, 16);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0], (std::pair<int64_t, int64_t>{4, 8}));
  EXPECT_EQ(ranges[3], (std::pair<int64_t, int64_t>{28, 32}));
  // Rows split over 2: one range.
  EXPECT_EQ(whole_ranges({4, 8}, TensorSlice{0, 1, 1, 2}, 0, 16).size(), 1u);
  EXPECT_THROW(whole_ranges({6, 8}, TensorSlice{0, 1, 0, 4}, 0, 1), Error);
}

// A tensor-size-2 save (each rank's slice written as ranges of the whole parameter, the replicated
// bias by rank 0 only) read back as tensor size 4 slices and whole.
TEST(TensorSlice, SavedAtTwoReadAtFour) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("step1");
  std::filesystem::create_directories(dir);
  const at::Tensor w = torch::arange(48, torch::kFloat).view({12, 4});  // q, k, v rows
  const at::Tensor b = torch::arange(100, 104, torch::kFloat);
  write_manifest(
      dir,
      {{"format_version", kCheckpointFormatVersion},
       {"world_size", 2},
       {"zero_stage", 0},
       {"parameters",
        {param_to_json({"w", {12, 4}, "float32", 0, 3}), param_to_json({"b", {4}, "float32"})}},
       {"client_state", nlohmann::json::object()}});
  for (int rank = 0; rank < 2; ++rank) {
    const TensorSlice slice{0, 3, rank, 2};
    const at::Tensor local = cut(w, slice).reshape({-1});
    std::vector<StateRecord> records;
    int64_t at = 0;
    for (const auto& [lo, hi] : whole_ranges({12, 4}, slice, 0, local.numel())) {
      for (StateKind kind : kStateKinds)
        records.push_back({"w", lo, hi, kind, local.slice(0, at, at + hi - lo).clone()});
      at += hi - lo;
    }
    if (rank == 0)
      for (StateKind kind : kStateKinds) records.push_back({"b", 0, 4, kind, b});
    write_rank_shard(dir, rank, 2, records);
  }
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.parameters()[0].split_dim, 0);
  EXPECT_EQ(reader.parameters()[0].split_blocks, 3);
  EXPECT_TRUE(torch::equal(reader.consolidated_weights().at("w"), w));
  for (int rank = 0; rank < 4; ++rank) {
    const TensorSlice slice{0, 3, rank, 4};
    const at::Tensor want = cut(w, slice).reshape({-1});
    const auto got =
        reader.read_ranges("w", StateKind::kExpAvg, whole_ranges({12, 4}, slice, 0, want.numel()));
    EXPECT_TRUE(torch::equal(got, want)) << "rank " << rank;
  }
  EXPECT_THROW(reader.read_ranges("w", StateKind::kFp32, {{4, 8}, {2, 3}}), IoError);
}

}  // namespace tensor_slice_test
}  // namespace deepshard::checkpoint
