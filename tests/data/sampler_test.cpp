// Tests of DistributedSampler: windows come from the file, targets are inputs shifted by one,
// draws are deterministic, the global batch of a step (its windows and sample keys) does not
// depend on how it is split over ranks and micro-steps, any step can be produced directly
// (resume), and the objective is applied to every batch.
#include "data/sampler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <random>
#include <set>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::data {
namespace sampler_test {

using testing::TempDir;

constexpr int64_t kBlock = 16;

class SamplerTest : public ::testing::Test {
 protected:
  SamplerTest() {
    std::mt19937 rng(7);
    std::vector<uint16_t> tokens(5000);
    for (auto& t : tokens) t = static_cast<uint16_t>(rng() % 256);
    write_token_file(dir_.file("train.bin"), tokens, 256);
    file_ = std::make_unique<TokenFile>(dir_.file("train.bin"));
  }

  // The global batch of `step` ([global_batch, kBlock] inputs) assembled from every rank's
  // micro-batches in global order: rank, then micro-step, then position.
  at::Tensor global_inputs(int world, int64_t micro, int64_t gas, int64_t step,
                           bool keys = false) const {
    std::vector<at::Tensor> parts;
    for (int rank = 0; rank < world; ++rank) {
      DistributedSampler sampler(*file_, kBlock, micro, gas, rank, world, /*seed=*/42);
      for (int64_t m = 0; m < gas; ++m) {
        const Batch b = sampler.batch(step, m);
        parts.push_back(keys ? b.sample_keys : b.inputs);
      }
    }
    return torch::cat(parts);
  }

  TempDir dir_;
  std::unique_ptr<TokenFile> file_;
};

TEST_F(SamplerTest, WindowsComeFromTheFileAndTargetsAreShiftedInputs) {
  DistributedSampler sampler(*file_, kBlock, 4, 2, /*rank=*/1, /*world=*/2, 42);
  Batch b = sampler.batch(3, 1);
  EXPECT_EQ(b.inputs.sizes(), (std::vector<int64_t>{4, kBlock}));
  EXPECT_EQ(b.targets.sizes(), (std::vector<int64_t>{4, kBlock}));
  EXPECT_EQ(b.inputs.scalar_type(), at::kLong);
  EXPECT_EQ(b.targets.scalar_type(), at::kLong);
  EXPECT_TRUE(b.inputs.device().is_cpu());
  EXPECT_TRUE(b.inputs.is_contiguous() && b.targets.is_contiguous());
  for (int64_t p = 0; p < 4; ++p) {
    int64_t start = sampler.sample_offset(3, sampler.global_index(1, 1, p));
    for (int64_t t = 0; t < kBlock; ++t) {
      ASSERT_EQ(b.inputs[p][t].item<int64_t>(), file_->token(start + t));
      ASSERT_EQ(b.targets[p][t].item<int64_t>(), file_->token(start + t + 1));
    }
  }
}

TEST_F(SamplerTest, GlobalIndexIsRankMajorThenMicroStepThenPosition) {
  DistributedSampler sampler(*file_, kBlock, /*micro=*/3, /*gas=*/2, 0, /*world=*/4, 42);
  std::set<int64_t> seen;
  for (int r = 0; r < 4; ++r)
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t p = 0; p < 3; ++p) {
        EXPECT_EQ(sampler.global_index(r, m, p), r * 6 + m * 3 + p);
        seen.insert(sampler.global_index(r, m, p));
      }
  EXPECT_EQ(seen.size(), 24u);  // a bijection onto 0 .. train_batch - 1
}

TEST_F(SamplerTest, DeterministicForASeedAndDifferentAcrossSeedsAndSteps) {
  DistributedSampler a(*file_, kBlock, 8, 1, 0, 1, 42), b(*file_, kBlock, 8, 1, 0, 1, 42);
  DistributedSampler other_seed(*file_, kBlock, 8, 1, 0, 1, 43);
  EXPECT_TRUE(torch::equal(a.batch(5, 0).inputs, b.batch(5, 0).inputs));
  EXPECT_FALSE(torch::equal(a.batch(5, 0).inputs, other_seed.batch(5, 0).inputs));
  EXPECT_FALSE(torch::equal(a.batch(5, 0).inputs, a.batch(6, 0).inputs));
}

TEST_F(SamplerTest, GlobalBatchIsIndependentOfRankCountAndMicroBatchSplit) {
  // Global batch 8 = micro x gas x world, split six ways over 1, 2 and 4 ranks.
  const struct {
    int world;
    int64_t micro, gas;
  } splits[] = {{1, 8, 1}, {1, 4, 2}, {2, 4, 1}, {2, 2, 2}, {4, 2, 1}, {4, 1, 2}};
  for (int64_t step : {0, 1, 17}) {
    at::Tensor reference = global_inputs(1, 8, 1, step);
    at::Tensor reference_keys = global_inputs(1, 8, 1, step, /*keys=*/true);
    ASSERT_EQ(reference.size(0), 8);
    ASSERT_EQ(reference_keys.size(0), 8);
    // Distinct keys, non-negative, and not those of another step.
    EXPECT_EQ(std::get<0>(at::_unique(reference_keys)).size(0), 8);
    EXPECT_GE(reference_keys.min().item<int64_t>(), 0);
    EXPECT_FALSE(torch::equal(reference_keys, global_inputs(1, 8, 1, step + 1, true)));
    for (const auto& s : splits) {
      EXPECT_TRUE(torch::equal(global_inputs(s.world, s.micro, s.gas, step), reference))
          << "step " << step << ", world " << s.world << ", micro " << s.micro << ", gas " << s.gas;
      EXPECT_TRUE(torch::equal(global_inputs(s.world, s.micro, s.gas, step, true), reference_keys))
          << "keys: step " << step << ", world " << s.world << ", micro " << s.micro;
    }
  }
}

TEST_F(SamplerTest, AnyStepCanBeProducedDirectly) {
  DistributedSampler walk(*file_, kBlock, 2, 2, 1, 2, 42);
  std::vector<at::Tensor> sequential;
  for (int64_t step = 0; step < 12; ++step)
    for (int64_t m = 0; m < 2; ++m) sequential.push_back(walk.batch(step, m).inputs);
  for (int64_t step = 11; step >= 0; --step) {  // a fresh sampler, steps in reverse
    DistributedSampler resumed(*file_, kBlock, 2, 2, 1, 2, 42);
    for (int64_t m = 0; m < 2; ++m)
      EXPECT_TRUE(torch::equal(resumed.batch(step, m).inputs, sequential[step * 2 + m]))
          << "step " << step << " micro-step " << m;
  }
}

TEST_F(SamplerTest, TheObjectiveIsAppliedToEveryBatch) {
  DistributedSampler plain(*file_, kBlock, 4, 1, 0, 1, 42),
      objective(*file_, kBlock, 4, 1, 0, 1, 42);
  std::vector<int64_t> seen_keys;
  objective.set_objective([&](Batch& b) {
    seen_keys.push_back(b.sample_keys[0].item<int64_t>());
    b.targets = b.inputs * 0 - 100;
  });
  const Batch a = plain.batch(2, 0), b = objective.batch(2, 0);
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  EXPECT_TRUE(torch::equal(b.targets, torch::full({4, kBlock}, -100, at::kLong)));
  EXPECT_EQ(seen_keys, (std::vector<int64_t>{a.sample_keys[0].item<int64_t>()}));
}

TEST(Sampler, OffsetsCoverEveryStartAndStayInRange) {
  TempDir dir;
  // 20 tokens, block 16: windows of 17 tokens start at 0 .. 3.
  std::vector<uint16_t> tokens(20);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
  write_token_file(dir.file("small.bin"), tokens, 256);
  TokenFile file(dir.file("small.bin"));
  DistributedSampler sampler(file, 16, 4, 1, 0, 1, 9);
  std::map<int64_t, int> counts;
  for (int64_t step = 0; step < 200; ++step)
    for (int64_t i = 0; i < 4; ++i) counts[sampler.sample_offset(step, i)]++;
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_EQ(counts.begin()->first, 0);
  EXPECT_EQ(counts.rbegin()->first, 3);
  for (const auto& [start, n] : counts) EXPECT_GT(n, 120) << "start " << start;  // ~200 each
  // Windows reach both ends of the file (tokens are their own index here) and never beyond.
  std::vector<at::Tensor> inputs, targets;
  for (int64_t step = 0; step < 20; ++step) {
    inputs.push_back(sampler.batch(step, 0).inputs);
    targets.push_back(sampler.batch(step, 0).targets);
  }
  EXPECT_EQ(torch::cat(inputs).min().item<int64_t>(), 0);
  EXPECT_EQ(torch::cat(targets).max().item<int64_t>(), 19);
}

TEST(Sampler, FileShorterThanOneWindowIsAnIoErrorNamingIt) {
  TempDir dir;
  write_token_file(dir.file("tiny.bin"), std::vector<uint16_t>(16, 1), 256);
  TokenFile file(dir.file("tiny.bin"));
  try {
    DistributedSampler sampler(file, 16, 1, 1, 0, 1, 0);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("tiny.bin") +
                  ": 16 tokens, too short for one window of block_size + 1 = 17 tokens");
  }
  EXPECT_NO_THROW(DistributedSampler(file, 15, 1, 1, 0, 1, 0));
}

TEST(Sampler, RejectsABadRankOrSizes) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), std::vector<uint16_t>(100, 1), 256);
  TokenFile file(dir.file("t.bin"));
  EXPECT_THROW(DistributedSampler(file, 8, 1, 1, 2, 2, 0), Error);
  EXPECT_THROW(DistributedSampler(file, 8, 0, 1, 0, 1, 0), Error);
  DistributedSampler ok(file, 8, 1, 2, 0, 1, 0);
  EXPECT_THROW(ok.batch(0, 2), Error);  // micro-step outside gradient accumulation
}

}  // namespace sampler_test
}  // namespace deepshard::data
