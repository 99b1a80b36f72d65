// ZeRO-Infinity's optimizer step (offload_optimizer.device = nvme), for any stage: a rank's Adam
// state over its fp32 shard lives in swap files, one per sub-group of at most sub_group_size
// elements (exp_avg, exp_avg_sq, and the fp32 master when the parameters are bf16/fp16; fp32
// parameters are their own master and stay where the stage keeps them). The step reads each
// sub-group into a reusable buffer, runs the fused CPU Adam on it, hands the updated master to the
// stage (`publish`: cast into the parameters) and writes it back; pipeline_read / pipeline_write
// overlap the read of the next and the write of the previous sub-group with Adam. An I/O failure on
// any rank becomes an error on every rank that names the failed rank's file.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>

#include "deepshard/comm/group.h"
#include "deepshard/config/ds_config.h"
#include "offload/sub_group_swapper.h"
#include "optim/adam.h"

namespace deepshard::zero {

class SwappedAdam {
 public:
  // Writes `window` [lo, lo + n) of the rank's fp32 master into `out` (initial values), or takes
  // the updated values from `master` (publish into the parameters).
  using Fill = std::function<void(int64_t lo, int64_t n, float* out)>;
  using Publish = std::function<void(int64_t lo, int64_t n, const float* master)>;

  // `adam`: built with host_state false over the shard. `groups`: the sub-groups covering it in
  // order (split_sub_groups of the shard, or a stage's own cut). `swap_master`: the fp32 master is
  // swapped too (bf16/fp16 parameters), initialised from `fill`. offload_optimizer.ratio < 1 (stage
  // 3): the first floor((1 - ratio) * groups) sub-groups stay in RAM on the compute device
  // (DeepSpeed's partial offload), the others are swapped. Creates and initialises the swap files.
  SwappedAdam(const config::DsConfig& config, int rank, optim::FlatAdam& adam, bool swap_master,
              std::vector<offload::SubGroup> groups, const Fill& fill);
  ~SwappedAdam();

  // How many of `groups` sub-groups stay resident for offload_optimizer.ratio.
  static size_t resident_groups(const config::DsConfig& config, size_t groups);
  // The swap files' size and the buffers' RAM for these sub-groups (estimator, ledger).
  static int64_t file_bytes(const config::DsConfig& config,
                            const std::vector<offload::SubGroup>& groups, bool swap_master);
  static int64_t buffer_bytes(const config::DsConfig& config,
                              const std::vector<offload::SubGroup>& groups, bool swap_master);
  int64_t held_bytes() const { return swapper_ ? swapper_->held_bytes() : 0; }
  int64_t resident_numel() const { return resident_numel_; }  // elements kept in RAM

  // One Adam step over the shard. `grads`: the reduced fp32 gradient shard. `master`: the fp32
  // master in RAM when not swapped (the ranges' param_offsets point into it), else undefined.
  // Collective (agreement on success).
  void step(comm::Group& group, const at::Tensor& grads, const at::Tensor& master, double lr,
            float grad_factor, const Publish& publish);
  // Checkpoints: copy the whole state out to / in from host tensors of the shard's size
  // (`master` ignored unless swapped).
  void read_all(const at::Tensor& master, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq);
  void write_all(const at::Tensor& master, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq);

 private:
  optim::FlatAdam& adam_;
  bool swap_master_;
  int64_t resident_numel_ = 0;  // [0, resident_numel_): the resident sub-groups
  at::Tensor resident_exp_avg_, resident_exp_avg_sq_, resident_master_;
  std::unique_ptr<offload::SubGroupSwapper> swapper_;  // null when every sub-group is resident
};

// The folder under nvme_path for this run's swap files.
std::string swap_run_name(const config::DsConfig& config);
// The swap options of offload_optimizer and aio (the folder <nvme_path>/<run name>/<what>).
offload::SwapOptions swap_options(const config::DsConfig& config, const config::OffloadConfig& o,
                                  const std::string& what, int rank);

}  // namespace deepshard::zero
