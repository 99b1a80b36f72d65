// PowerSGD (comm::PowerSgd) in one process (a one-rank group, where the all-reduces are identities
// and everything else is the algorithm): which gradients are compressed, one compression round
// against a reference written with plain tensor ops (QR for the orthogonalisation), error feedback
// (the transmitted updates add up to the true gradients minus a bounded residual), and the
// checkpoint state round trip.
#include "comm/powersgd.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace powersgd_test {

std::unique_ptr<Group> local_group() {
  return Group::create(RendezvousInfo{}, std::chrono::milliseconds(1000));
}

// A flat buffer: a 20x30 matrix, a 7-vector, a 16x12 matrix, a 3x2 matrix, 5 padding elements.
std::vector<GradientTensor> layout() {
  return {{0, {20, 30}}, {600, {7}}, {607, {16, 12}}, {799, {3, 2}}};
}
constexpr int64_t kFlat = 810;

PowerSgdOptions options(int64_t rank) {
  PowerSgdOptions o;
  o.matrix_approximation_rank = rank;
  o.start_compressing_after_step = 0;
  return o;
}

// Columns of an orthonormal basis of m's column space as Gram-Schmidt gives it: QR with the signs
// fixed so that R's diagonal is positive.
at::Tensor orthonormal(const at::Tensor& m) {
  auto [q, r] = at::linalg_qr(m.to(at::kDouble));
  return (q * at::sign(r.diagonal()).unsqueeze(0)).to(m.scalar_type());
}

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

TEST(PowerSgd, CompressesOnlyMatricesWorthIt) {
  auto group = local_group();
  // rank 2, min rate 2: 20x30 -> (50)*2*2 = 200 < 600 yes; 7-vector no; 16x12 -> 112 < 192 yes;
  // 3x2 -> (5)*2*2 = 20 < 6 no. Uncompressed: 7 + 6 + 5 padding; P: 40 + 32; Q: 60 + 24.
  PowerSgd psgd(*group, options(2), layout(), kFlat);
  EXPECT_EQ(psgd.compressed_numel(), 18 + 72 + 84);
  PowerSgdOptions strict = options(2);
  strict.min_compression_rate = 5;  // 20x30: 200*2.5 = 500 < 600 yes; 16x12: 280 > 192 no
  PowerSgd fewer(*group, strict, layout(), kFlat);
  EXPECT_EQ(fewer.compressed_numel(), 18 + 192 + 40 + 60);
}

TEST(PowerSgd, OneRoundMatchesAReferenceWithPlainTensorOps) {
  auto group = local_group();
  PowerSgd psgd(*group, options(2), layout(), kFlat);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
  at::Tensor grads = at::randn({kFlat}, generator);
  at::Tensor error = at::randn({kFlat}, generator).mul_(0.1);
  at::Tensor q0 = at::randn({60 + 24}, generator);
  psgd.load_state({{"error", error}, {"q", q0}, {"q_ready", at::ones({1}, at::kLong)}});

  // Reference: M = g + e; Q = orth(Q0); P = orth(M Q); Q = M^T P; result P Q^T; vectors as is.
  at::Tensor m = grads + error;
  at::Tensor want = m.clone();
  struct Piece {
    int64_t offset, rows, cols, q_offset;
  };
  for (const Piece& p : {Piece{0, 20, 30, 0}, Piece{607, 16, 12, 60}}) {
    at::Tensor mat = m.narrow(0, p.offset, p.rows * p.cols).view({p.rows, p.cols});
    at::Tensor q = orthonormal(q0.narrow(0, p.q_offset, p.cols * 2).view({p.cols, 2}));
    at::Tensor pm = orthonormal(mat.mm(q));
    at::Tensor qm = mat.t().mm(pm);
    want.narrow(0, p.offset, p.rows * p.cols).copy_(pm.mm(qm.t()).view({-1}));
  }

  at::Tensor got = grads.clone();
  psgd.all_reduce_mean(got, /*step=*/3);
  EXPECT_LT(rel_diff(got, want), 1e-5);
  // The residual is what the next step adds: (g + e) - result.
  EXPECT_LT(rel_diff(psgd.state().at("error"), m - want), 1e-5);
  // Not a plain copy: the matrices were approximated (rank 2 of random 20x30 is lossy).
  EXPECT_GT(rel_diff(got.narrow(0, 0, 600), m.narrow(0, 0, 600)), 0.1);
}

TEST(PowerSgd, BeforeTheStartStepItIsAPlainAllReduce) {
  auto group = local_group();
  PowerSgdOptions o = options(1);
  o.start_compressing_after_step = 10;
  PowerSgd psgd(*group, o, layout(), kFlat);
  at::Tensor g = at::randn({kFlat});
  at::Tensor got = g.clone();
  psgd.all_reduce_mean(got, 9);
  EXPECT_TRUE(at::equal(got, g));  // one rank: the mean is the gradient itself
  EXPECT_TRUE(psgd.compressing(10));
  EXPECT_FALSE(psgd.compressing(9));
}

// With error feedback, sum(transmitted) = sum(true gradients) - final residual: the relative gap
// shrinks as steps accumulate; without it the bias of a rank-1 approximation stays.
TEST(PowerSgd, ErrorFeedbackMakesTheTransmittedSumConverge) {
  auto group = local_group();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor base = at::randn({kFlat}, generator);
  auto run = [&](bool feedback, int steps) {
    PowerSgdOptions o = options(1);
    o.use_error_feedback = feedback;
    PowerSgd psgd(*group, o, layout(), kFlat);
    at::Tensor sum_true = at::zeros({kFlat}), sum_sent = at::zeros({kFlat});
    auto noise = at::make_generator<at::CPUGeneratorImpl>(3);
    for (int s = 0; s < steps; ++s) {
      at::Tensor g = base + 0.3 * at::randn({kFlat}, noise);
      sum_true += g;
      at::Tensor sent = g.clone();
      psgd.all_reduce_mean(sent, s);
      sum_sent += sent;
    }
    if (feedback) {  // the identity behind error feedback
      EXPECT_LT(rel_diff(sum_sent + psgd.state().at("error"), sum_true), 1e-4);
    }
    return rel_diff(sum_sent, sum_true);
  };
  const double with_10 = run(true, 10), with_1000 = run(true, 1000);
  const double without_1000 = run(false, 1000);
  std::printf(
      "relative gap of the sums: error feedback %.4f (10 steps), %.4f (1000 steps); "
      "without %.4f (1000 steps)\n",
      with_10, with_1000, without_1000);
  EXPECT_LT(with_1000, with_10 / 5);
  EXPECT_LT(with_1000, 0.05);
  EXPECT_GT(without_1000, 0.2);
}

TEST(PowerSgd, StateRoundTripContinuesIdentically) {
  auto group = local_group();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(5);
  std::vector<at::Tensor> grads;
  for (int s = 0; s < 6; ++s) grads.push_back(at::randn({kFlat}, generator));
  PowerSgd a(*group, options(2), layout(), kFlat);
  std::vector<at::Tensor> out_a;
  for (int s = 0; s < 6; ++s) {
    at::Tensor g = grads[s].clone();
    a.all_reduce_mean(g, s);
    out_a.push_back(g);
  }
  PowerSgd first(*group, options(2), layout(), kFlat);
  for (int s = 0; s < 3; ++s) {
    at::Tensor g = grads[s].clone();
    first.all_reduce_mean(g, s);
  }
  PowerSgd resumed(*group, options(2), layout(), kFlat);
  resumed.load_state(first.state());
  for (int s = 3; s < 6; ++s) {
    at::Tensor g = grads[s].clone();
    resumed.all_reduce_mean(g, s);
    EXPECT_TRUE(at::equal(g, out_a[s])) << "step " << s;
  }
  EXPECT_THROW(resumed.load_state({{"error", at::zeros({3})},
                                   {"q", at::zeros({84})},
                                   {"q_ready", at::ones({1}, at::kLong)}}),
               Error);
}

}  // namespace powersgd_test
}  // namespace deepshard::comm
