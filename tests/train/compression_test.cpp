// PowerSGD gradient compression end to end (`deepshard launch`, real ranks, the tiny GPT of
// run_helpers): before start_compressing_after_step the run equals the uncompressed one (within
// 1e-4: one whole-buffer all-reduce instead of buckets changes only rounding); compressing from
// step 100 (after the early steps, as PyTorch advises) with rank 8 (the tiny GPT's matrices are 64
// wide; issue #16's rank 4 on `small` is scripts/bench_powersgd.sh), 300 steps end within 3 % of
// the uncompressed final loss at stages 0 and 1 (measured: 0.6 %; from step 10 it was 1.5 % before
// and 7.9 % after the fused-kernel/tokenizer merges changed the run: too close to the edge), and a
// compressed stage-0 step moves at most 1/5 of the bytes (1/5.5).
// Exact resume mid-compression: checkpoint_resume_test.cpp. One compression round against plain
// tensor ops and error feedback: tests/comm/powersgd_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace compression_test {

std::string powersgd(int64_t rank, int64_t start) {
  return R"("compression": {"type": "powerSGD", "params": {"matrix_approximation_rank": )" +
         std::to_string(rank) + R"(, "start_compressing_after_step": )" + std::to_string(start) +
         "}}";
}

std::string stage(int s) {
  return R"("zero_optimization": {"stage": )" + std::to_string(s) +
         R"(, "reduce_bucket_size": 20000})";
}

TEST(Compression, BeforeTheStartStepTrainingIsUnchanged) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  for (int ranks : {2, 3}) {
    for (int s : {0, 1}) {
      const std::string name = "n" + std::to_string(ranks) + "_z" + std::to_string(s);
      const auto plain =
          train_and_read_losses(dir, data, ranks, 2, 2, name + "_plain", "{" + stage(s) + "}");
      const auto waiting = train_and_read_losses(dir, data, ranks, 2, 2, name + "_waiting",
                                                 "{" + stage(s) + ", " + powersgd(2, 1000) + "}");
      expect_same_losses(waiting, plain, name + ": PowerSGD before its start step");
    }
  }
}

TEST(Compression, PowerSgdTracksUncompressedTrainingWithAFifthOfTheBytes) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const int64_t steps = 300;
  for (int s : {0, 1}) {
    const std::string z = "_z" + std::to_string(s);
    const auto plain = train_long(dir, data, "plain" + z, "{" + stage(s) + "}", steps);
    const auto compressed = train_long(dir, data, "powersgd" + z,
                                       "{" + stage(s) + ", " + powersgd(8, 100) + "}", steps);
    EXPECT_LT(std::abs(compressed.final_loss - plain.final_loss) / plain.final_loss, 0.03)
        << "stage " << s << ": " << compressed.final_loss << " vs " << plain.final_loss;
    EXPECT_LT(compressed.last_step_bytes, plain.last_step_bytes) << "stage " << s;
    // Stage 0 moves only the gradient; stage 1 also all-gathers the updated parameters.
    if (s == 0) {
      EXPECT_LE(compressed.last_step_bytes, plain.last_step_bytes / 5);
    }
  }
}

}  // namespace compression_test
}  // namespace deepshard::testing
