// keep_input / restore_input and the contiguous buffer (see kept_input.h).
#include "activation/kept_input.h"

#include <torch/torch.h>

#include "deepshard/comm/group.h"
#include "deepshard/util/error.h"

namespace deepshard::activation {
namespace {

int group_size(comm::Group* group) { return group != nullptr ? group->size() : 1; }

// DeepSpeed's is_activation_to_checkpoint.
bool transformable(const at::Tensor& t, int parts) {
  return t.defined() && t.is_floating_point() && t.numel() >= parts;
}

}  // namespace

at::Tensor ContiguousBuffer::slot(int64_t region, size_t position, int64_t numel,
                                  const at::Tensor& like, bool on_host) {
  DS_CHECK(region < regions_, Error,
           "activation_checkpointing.contiguous_memory_optimization: ", "region ", region,
           " is beyond number_checkpoints ", regions_);
  if (buffers_.size() <= position) buffers_.resize(position + 1);
  at::Tensor& buffer = buffers_[position];
  auto options = like.options();
  if (on_host) options = options.device(at::kCPU);
  if (!buffer.defined()) buffer = torch::empty({regions_, numel}, options);
  DS_CHECK(buffer.size(1) == numel && buffer.scalar_type() == like.scalar_type() &&
               buffer.device() == options.device(),
           Error, "activation_checkpointing.contiguous_memory_optimization: input ", position,
           " of region ", region, " has ", numel, " elements of ", like.scalar_type(), " on ",
           options.device(), "; the buffer's slots (sized by the pass's first region) hold ",
           buffer.size(1), " of ", buffer.scalar_type(), " on ", buffer.device());
  return buffer[region];
}

int64_t KeptInput::bytes() const {
  return data.defined() ? data.numel() * int64_t(data.element_size()) : 0;
}

KeptInput keep_input(const at::Tensor& input, size_t position, const KeepOptions& options) {
  KeptInput k;
  const int parts = options.partition ? group_size(options.group) : 1;
  if (!input.defined() || !transformable(input, parts) ||
      (parts == 1 && !options.host && options.contiguous == nullptr) ||
      (parts == 1 && options.host && options.contiguous == nullptr && input.device().is_cpu())) {
    // As it is (on a CPU compute device, host memory is where it already is).
    k.data = input.defined() ? input.detach() : input;
    k.as_is = true;
    k.version = input.defined() ? input._version() : 0;
    return k;
  }
  torch::NoGradGuard no_grad;
  k.sizes = input.sizes().vec();
  k.device = input.device();
  k.numel = input.numel();
  at::Tensor flat = input.detach().contiguous().view({-1});
  at::Tensor part = flat;
  if (parts > 1) {
    // This rank's contiguous slice of the flat input, padded to size * slice elements.
    k.partitioned = true;
    const int64_t slice = (k.numel + parts - 1) / parts;
    const int64_t begin = std::min<int64_t>(k.numel, slice * options.group->rank());
    const int64_t n = std::min<int64_t>(slice, k.numel - begin);
    part = torch::zeros({slice}, flat.options());
    if (n > 0) part.narrow(0, 0, n).copy_(flat.narrow(0, begin, n));
  }
  if (options.contiguous != nullptr) {
    at::Tensor slot =
        options.contiguous->slot(options.region, position, part.numel(), part, options.host);
    slot.copy_(part);
    k.data = slot;
  } else if (options.host) {
    k.data = part.to(at::kCPU);
  } else {
    k.data = part;  // parts > 1 (every other case is handled above)
  }
  return k;
}

at::Tensor restore_input(const KeptInput& kept, comm::Group* group, size_t position) {
  if (kept.as_is) {
    if (kept.data.defined())
      DS_CHECK(kept.data._version() == kept.version, Error, "activation checkpointing: input ",
               position,
               " of a checkpointed region was modified in place after the region ran; its "
               "recompute would see other values");
    return kept.data;
  }
  torch::NoGradGuard no_grad;
  at::Tensor part = kept.data.to(kept.device);
  if (!kept.partitioned) return part.view(kept.sizes);
  const int parts = group_size(group);
  at::Tensor full = torch::empty({part.numel() * parts}, part.options());
  group->all_gather(full, part.contiguous());
  return full.narrow(0, 0, kept.numel).view(kept.sizes);
}

}  // namespace deepshard::activation
