// QuantizedReduceScatter: ZeRO++'s quantized gradients (qgZ, zero_quantized_gradients), the
// reduce-scatter of a ZeRO-3 unit's gradients replaced by int8 block quantization and all-to-all.
// The unit's gradient buffer holds N equal slices (N ranks, c elements each); slice j is rank j's.
// Each slice is quantized on its own (blocks of kBlock values restarting at every slice, one fp32
// scale per block: kernels/int8_quantize.h), so every piece a rank receives dequantizes alone.
//  - one stage (the ranks on one node, or one rank per node): an all-to-all of the int8 values and
//    of the scales over the group; each rank dequantizes the N pieces of its own slice and sums
//    them in fp32, in rank order, then divides by N (the mean, as the fp32 reduce-scatter);
//  - hierarchical (K nodes of M ranks, 1 < M < N, ranks host-major): first inside the node, an
//    all-to-all over the node's M ranks in which local rank l receives, from every rank of its
//    node, the K slices that the ranks of local rank l own on the K nodes; it dequantizes and sums
//    them in fp32 (the node's partial sums of those K slices), quantizes the partial sums again
//    and exchanges them in an all-to-all over the K ranks of local rank l (one per node), each
//    receiving the K partial sums of its own slice, dequantized and summed in fp32, divided by N.
//    Across nodes each rank sends K*c int8 values plus 4 bytes per block where the fp32
//    hierarchical reduce-scatter sends K*c fp32 values: about a quarter of the bytes.
// Error (|x - Q(x)| <= m / 128 for a block of absolute maximum m, kernels/int8_quantize.h): element
// i of the result differs from the exact mean by at most (1/N) * sum over ranks r of m_r / 128 in
// one stage, and (2/N) * sum_r m_r / 128 hierarchically (the requantized partial sums' block
// maximum is at most the sum of their ranks' m_r), m_r being the absolute maximum of rank r's
// block holding element i of the slice (plus fp32 rounding).
// The groups' traffic is recorded in the given group's comm log (as "all_to_all", int8 and
// scales, under its link class: the node's stage intra-node, the cross stage cross-node).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

class QuantizedReduceScatter {
 public:
  static constexpr int64_t kBlock = 4096;

  // Over `group`, whose ranks are host-major with `ranks_per_node` on each node: hierarchical when
  // 1 < ranks_per_node < group.size() and it divides group.size(), then this joins its node's
  // group and its cross-node group (a collective over `group`: every rank constructs it at the
  // same point); otherwise one stage over `group` itself.
  QuantizedReduceScatter(comm::Group& group, int ranks_per_node);
  ~QuantizedReduceScatter();

  bool hierarchical() const { return node_ != nullptr; }

  // One reduction in flight; wait() completes it (issuing the cross-node stage when hierarchical).
  class Reduction {
   public:
    virtual ~Reduction() = default;
    virtual void wait() = 0;
  };
  // Starts out = the mean over ranks of slice rank() of `in`. in: size() * c elements of a
  // floating dtype (fp32 and bf16 are quantized as they are, others from an fp32 copy); out: c
  // fp32 elements, written by wait(). Both contiguous; they must live until wait() returns.
  // Reductions are started and waited for in the same order on every rank.
  std::unique_ptr<Reduction> start(const at::Tensor& out, const at::Tensor& in);

  // Bytes this rank hands the all-to-alls of one stage that moves `rows` slices of c elements.
  static int64_t wire_bytes(int64_t rows, int64_t c) {
    return rows * (c + 4 * ((c + kBlock - 1) / kBlock));
  }

 private:
  comm::Group& group_;
  int per_node_ = 1, nodes_ = 1;
  std::unique_ptr<comm::Group> node_, cross_;  // hierarchical only
};

}  // namespace deepshard::zero
