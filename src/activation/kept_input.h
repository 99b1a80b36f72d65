// How a checkpointed region's inputs are kept between its forward and its recompute, as DeepSpeed's
// options say: as they are; partitioned across the model-parallel group (this rank keeps a
// 1/size slice, backward all-gathers it); moved to host memory (cpu_checkpointing); copied into
// one buffer preallocated for all regions of a pass (contiguous_memory_optimization). Only
// floating-point tensors with at least one element per model-parallel rank are transformed
// (DeepSpeed's rule); other inputs are kept as they are.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace deepshard::comm {
class Group;
}

namespace deepshard::activation {

// contiguous_memory_optimization: for each input position, one buffer of `regions` slots, each
// the size of the first region's kept input at that position, allocated at the first region of
// a pass. A new pass starts a new buffer (the old one lives while its slots are still kept).
class ContiguousBuffer {
 public:
  explicit ContiguousBuffer(int64_t regions) : regions_(regions) {}
  // The slot of region `region` for input `position`, `numel` elements like `like`.
  at::Tensor slot(int64_t region, size_t position, int64_t numel, const at::Tensor& like,
                  bool on_host);
  void reset() { buffers_.clear(); }

 private:
  int64_t regions_;
  std::vector<at::Tensor> buffers_;  // per position: [regions_, slot numel]
};

struct KeepOptions {
  bool partition = false;                  // partition_activations
  bool host = false;                       // cpu_checkpointing
  comm::Group* group = nullptr;            // the model-parallel group (nullptr: one rank)
  ContiguousBuffer* contiguous = nullptr;  // contiguous_memory_optimization
  int64_t region = 0;                      // the region's index in the pass
};

struct KeptInput {
  at::Tensor data;       // what is held (the input itself, a slice, a host copy, a buffer slot)
  bool as_is = false;    // data is the (detached) input itself
  uint32_t version = 0;  // the input's version when kept (as_is: in-place changes are an error)
  bool partitioned = false;
  std::vector<int64_t> sizes;
  at::Device device = at::kCPU;
  int64_t numel = 0;
  int64_t bytes() const;  // of data's storage share
};

KeptInput keep_input(const at::Tensor& input, size_t position, const KeepOptions& options);
// The full input again, on its device (partitioned: an all-gather over `group`).
at::Tensor restore_input(const KeptInput& kept, comm::Group* group, size_t position);

}  // namespace deepshard::activation
