// The model-state estimator against design §4's formulas.
#include "zero/estimator.h"

#include <gtest/gtest.h>

#include "deepshard/util/error.h"

namespace deepshard::zero {
namespace estimator_test {

EstimateInput input(int64_t params, int64_t ranks, int stage, config::DType dtype) {
  EstimateInput in;
  in.num_params = params;
  in.world_size = ranks;
  in.stage = stage;
  in.dtype = dtype;
  in.grad_dtype = dtype;
  return in;
}

// Design §4 for bf16 parameters, with deepshard's fp32 gradient accumulation: stages 0/1 keep
// autograd's bf16 buffer (2Ψ) beside the fp32 accumulation buffer (4Ψ), stage 1 also the reduced
// fp32 shard; stage 2 keeps only the reduced fp32 shard.
TEST(Estimator, MatchesDesignTableForBf16WithFp32Gradients) {
  const int64_t psi = 1'000'000, n = 4;
  auto in = input(psi, n, 0, config::DType::kBf16);
  in.grad_dtype = config::DType::kFp32;
  auto s0 = estimate_model_states(in);
  EXPECT_EQ(s0.params, 2 * psi);
  EXPECT_EQ(s0.grads, 2 * psi + 4 * psi);
  EXPECT_EQ(s0.master + s0.optimizer, 12 * psi);
  in.stage = 1;
  auto s1 = estimate_model_states(in);
  EXPECT_EQ(s1.params, 2 * psi);
  EXPECT_EQ(s1.grads, 2 * psi + 4 * psi + 4 * psi / n);
  EXPECT_EQ(s1.master + s1.optimizer, 12 * psi / n);
  in.stage = 2;
  auto s2 = estimate_model_states(in);
  EXPECT_EQ(s2.params, 2 * psi);
  EXPECT_EQ(s2.grads, 4 * psi / n);
  EXPECT_EQ(s2.master + s2.optimizer, 12 * psi / n);
  in.stage = 3;
  auto s3 = estimate_model_states(in);
  EXPECT_EQ(s3.params, 2 * psi / n);
  EXPECT_EQ(s3.total(), 18 * psi / n);
}

TEST(Estimator, Fp32Stage2KeepsOnlyTheShardsAndTheStagingBuffers) {
  const int64_t psi = 1'000'000, n = 4;
  auto in = input(psi, n, 2, config::DType::kFp32);
  in.reduce_bucket_size = 1000;
  auto e = estimate_model_states(in);
  EXPECT_EQ(e.total(), 4 * psi + (4 + 8) * psi / n);
  EXPECT_EQ(e.master, 0);
  EXPECT_EQ(e.comm_buffers, 4 * 1000);  // one staging buffer
  in.overlap_comm = true;
  in.gradient_accumulation_steps = 3;
  EXPECT_EQ(estimate_model_states(in).comm_buffers, 2 * 4 * 1000 + 2 * 4 * 250);  // + receive
  in.reduce_scatter = false;  // all-reduce in the staging buffer: nothing to receive into
  EXPECT_EQ(estimate_model_states(in).comm_buffers, 2 * 4 * 1000);
}

// Design §4's bytes per step: stage 0 all-reduces the gradients (2 x payload moved); stages 1/2
// reduce-scatter them (stage 2 on every micro-step) and all-gather the parameters.
TEST(Estimator, CommPerStep) {
  const int64_t psi = 1'000'000, n = 4;
  auto in = input(psi, n, 0, config::DType::kFp32);
  in.gradient_accumulation_steps = 3;
  auto c0 = estimate_comm_per_step(in);
  EXPECT_EQ(c0.all_reduce, 4 * psi);
  EXPECT_EQ(c0.moved(n), 2 * 4 * psi);
  in.stage = 1;
  auto c1 = estimate_comm_per_step(in);
  EXPECT_EQ(c1.reduce_scatter, 4 * psi);
  EXPECT_EQ(c1.all_gather, 4 * psi / n);
  EXPECT_EQ(c1.moved(n), 2 * 4 * psi);
  in.stage = 2;
  EXPECT_EQ(estimate_comm_per_step(in).reduce_scatter, 3 * 4 * psi);
  in.world_size = 1;
  in.stage = 0;
  EXPECT_EQ(estimate_comm_per_step(in).moved(1), 0);  // one rank: nothing to average
}

// Stage 3 (design §4): every micro-step gathers each released unit for its forward and again for
// its backward and reduce-scatters all gradients, 3x the parameter bytes moved; the persistent
// units are gathered once per step, after the update. With accumulation, one unit's slice is the
// receive buffer.
TEST(Estimator, Stage3CommPerStepAndReceiveBuffer) {
  const int64_t psi = 1'000'000, n = 4;
  auto in = input(psi, n, 3, config::DType::kFp32);
  in.gradient_accumulation_steps = 2;
  auto c = estimate_comm_per_step(in);
  EXPECT_EQ(c.reduce_scatter, 2 * 4 * psi);
  EXPECT_EQ(c.all_gather, 2 * 2 * 4 * psi / n);
  EXPECT_EQ(c.moved(n), 3 * 2 * 4 * psi);
  in.persistent_params = 200'000;
  EXPECT_EQ(estimate_comm_per_step(in).all_gather, 4 * (2 * 2 * 800'000 + 200'000) / n);
  EXPECT_EQ(estimate_model_states(in).comm_buffers, 0);  // unit size unknown
  in.largest_unit_params = 1001;
  EXPECT_EQ(estimate_model_states(in).comm_buffers, 4 * 251);
  in.gradient_accumulation_steps = 1;
  EXPECT_EQ(estimate_model_states(in).comm_buffers, 0);
}

TEST(Estimator, Fp32HasNoSeparateMaster) {
  auto e = estimate_model_states(input(1000, 1, 0, config::DType::kFp32));
  EXPECT_EQ(e.master, 0);
  EXPECT_EQ(e.total(), 16 * 1000);
}

TEST(Estimator, PadsShardsUp) {
  auto e = estimate_model_states(input(10, 3, 3, config::DType::kFp32));
  EXPECT_EQ(e.params, 4 * 4);  // ceil(10 / 3) = 4 elements
  EXPECT_EQ(e.optimizer, 8 * 4);
}

TEST(Estimator, OffloadMovesOptimizerState) {
  auto in = input(1000, 2, 2, config::DType::kBf16);
  in.offload_optimizer = config::OffloadDevice::kCpu;
  auto e = estimate_model_states(in);
  EXPECT_EQ(e.offloaded, e.master + e.optimizer);
  EXPECT_EQ(e.on_device(), e.params + e.grads);
}

TEST(Estimator, RejectsBadInput) {
  EXPECT_THROW(estimate_model_states(input(10, 0, 0, config::DType::kFp32)), Error);
  EXPECT_THROW(estimate_model_states(input(10, 1, 4, config::DType::kFp32)), Error);
}

}  // namespace estimator_test
}  // namespace deepshard::zero
