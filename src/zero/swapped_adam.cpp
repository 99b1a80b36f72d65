// SwappedAdam (swapped_adam.h).
#include "zero/swapped_adam.h"

#include <torch/torch.h>

#include <cmath>

#include "deepshard/util/error.h"
#include "util/log.h"
#include "zero/rank_agreement.h"

namespace deepshard::zero {
namespace {

int arrays(bool swap_master) { return swap_master ? 3 : 2; }  // exp_avg, exp_avg_sq[, master]

at::Tensor window(const at::Tensor& t, int64_t lo, int64_t n) { return t.narrow(0, lo, n); }

at::Tensor wrap(float* p, int64_t n) {
  return at::from_blob(p, {n}, at::TensorOptions(at::kFloat));
}

}  // namespace

std::string swap_run_name(const config::DsConfig&) { return "deepshard"; }

offload::SwapOptions swap_options(const config::DsConfig& config, const config::OffloadConfig& o,
                                  const std::string& what, int rank) {
  offload::SwapOptions s;
  s.nvme_path = o.nvme_path;
  s.run = swap_run_name(config) + "/" + what;
  s.rank = rank;
  s.buffer_count = o.buffer_count;
  s.pin_memory = o.pin_memory;
  s.pipeline_read = o.pipeline_read;
  s.pipeline_write = o.pipeline_write;
  s.aio.block_size = config.aio.block_size;
  s.aio.queue_depth = config.aio.queue_depth;
  s.aio.threads = config.aio.intra_op_parallelism;
  s.aio.single_submit = config.aio.single_submit;
  s.aio.overlap_events = config.aio.overlap_events;
  return s;
}

size_t SwappedAdam::resident_groups(const config::DsConfig& config, size_t groups) {
  const double ratio = config.zero.offload_optimizer.ratio;
  return static_cast<size_t>(std::floor((1.0 - ratio) * static_cast<double>(groups)));
}

namespace {

std::vector<offload::SubGroup> swapped_part(const config::DsConfig& config,
                                            const std::vector<offload::SubGroup>& groups) {
  const size_t k = SwappedAdam::resident_groups(config, groups.size());
  return {groups.begin() + static_cast<std::ptrdiff_t>(k), groups.end()};
}

}  // namespace

int64_t SwappedAdam::file_bytes(const config::DsConfig& config,
                                const std::vector<offload::SubGroup>& groups, bool swap_master) {
  return offload::SubGroupSwapper::file_bytes(swapped_part(config, groups), arrays(swap_master));
}

int64_t SwappedAdam::buffer_bytes(const config::DsConfig& config,
                                  const std::vector<offload::SubGroup>& groups, bool swap_master) {
  return offload::SubGroupSwapper::buffer_bytes(swapped_part(config, groups), arrays(swap_master),
                                                config.zero.offload_optimizer.buffer_count);
}

SwappedAdam::SwappedAdam(const config::DsConfig& config, int rank, optim::FlatAdam& adam,
                         bool swap_master, std::vector<offload::SubGroup> all_groups,
                         const Fill& fill)
    : adam_(adam), swap_master_(swap_master) {
  const auto& o = config.zero.offload_optimizer;
  const size_t resident = resident_groups(config, all_groups.size());
  for (size_t i = 0; i < resident; ++i) resident_numel_ += all_groups[i].numel;
  const auto fp32 = at::TensorOptions(at::kFloat);
  resident_exp_avg_ = at::zeros({resident_numel_}, fp32);
  resident_exp_avg_sq_ = at::zeros({resident_numel_}, fp32);
  if (swap_master_) {
    resident_master_ = at::zeros({resident_numel_}, fp32);
    if (resident_numel_ > 0) fill(0, resident_numel_, resident_master_.data_ptr<float>());
  }
  std::vector<offload::SubGroup> groups(all_groups.begin() + static_cast<std::ptrdiff_t>(resident),
                                        all_groups.end());
  const int64_t slots = offload::SubGroupSwapper::slots_for(o.buffer_count, arrays(swap_master));
  if (rank == 0) {
    log::info("offload_optimizer nvme: ", groups.size(), " of ", all_groups.size(),
              " sub-groups (of at most ", config.zero.sub_group_size, " elements) swapped, ",
              arrays(swap_master), " fp32 arrays each, in ", o.nvme_path, "/",
              swap_run_name(config), "/optimizer; buffer_count ", o.buffer_count, ": ", slots,
              " sub-group(s) in flight (pipeline_read ", o.pipeline_read, ", pipeline_write ",
              o.pipeline_write, ")");
    if (o.buffer_count < arrays(swap_master)) {
      log::warn("zero_optimization.offload_optimizer.buffer_count ", o.buffer_count,
                " holds less than one sub-group (", arrays(swap_master),
                " arrays): one sub-group's buffers are allocated");
    }
    if ((o.pipeline_read || o.pipeline_write) &&
        slots < (o.pipeline_read && o.pipeline_write ? 3 : 2)) {
      log::warn("zero_optimization.offload_optimizer.buffer_count ", o.buffer_count, ": ", slots,
                " sub-group(s) in flight, too few to overlap both the read of the next and the "
                "write of the previous sub-group with Adam (needs ",
                3 * arrays(swap_master), ")");
    }
  }
  if (groups.empty()) return;
  swapper_ = std::make_unique<offload::SubGroupSwapper>(std::move(groups), arrays(swap_master),
                                                        swap_options(config, o, "optimizer", rank));
  swapper_->initialize([&](size_t, const offload::SubGroup& g, float* const* a) {
    if (swap_master_) fill(g.offset, g.numel, a[2]);  // moments start at zero
  });
}

SwappedAdam::~SwappedAdam() = default;

void SwappedAdam::step(comm::Group& group, const at::Tensor& grads, const at::Tensor& master,
                       double lr, float grad_factor, const Publish& publish) {
  DS_ASSERT(swap_master_ || master.defined(), "the fp32 master is neither swapped nor in RAM");
  adam_.begin_step();
  float* resident = master.defined() ? master.data_ptr<float>() : nullptr;
  const float* g = grads.data_ptr<float>();
  // The resident sub-groups first (one window: the arithmetic is element by element).
  if (resident_numel_ > 0) {
    float* first = swap_master_ ? resident_master_.data_ptr<float>() : resident;
    adam_.step_window(0, resident_numel_, resident, first, g, resident_exp_avg_.data_ptr<float>(),
                      resident_exp_avg_sq_.data_ptr<float>(), lr, grad_factor);
    if (swap_master_) publish(0, resident_numel_, first);
  }
  std::string error;
  try {
    if (swapper_) {
      swapper_->for_each([&](size_t, const offload::SubGroup& sg, float* const* a) {
        float* param_window = swap_master_ ? a[2] : resident + sg.offset;
        adam_.step_window(sg.offset, sg.numel, resident, param_window, g, a[0], a[1], lr,
                          grad_factor);
        if (swap_master_) publish(sg.offset, sg.numel, a[2]);
      });
    }
  } catch (const IoError& e) {
    error = e.what();
  }
  // One flag per step; the texts only when a rank failed.
  at::Tensor failed = torch::full({1}, error.empty() ? 0.0f : 1.0f, torch::kFloat);
  group.all_reduce(failed, comm::ReduceOp::kMax);
  if (failed.item<float>() > 0.0f)
    check_all_succeeded(group, "offload_optimizer nvme: optimizer step (swap files)", error);
}

void SwappedAdam::read_all(const at::Tensor& master, const at::Tensor& exp_avg,
                           const at::Tensor& exp_avg_sq) {
  window(exp_avg, 0, resident_numel_).copy_(resident_exp_avg_);
  window(exp_avg_sq, 0, resident_numel_).copy_(resident_exp_avg_sq_);
  if (swap_master_) window(master, 0, resident_numel_).copy_(resident_master_);
  if (!swapper_) return;
  swapper_->read_each([&](size_t, const offload::SubGroup& g, float* const* a) {
    window(exp_avg, g.offset, g.numel).copy_(wrap(a[0], g.numel));
    window(exp_avg_sq, g.offset, g.numel).copy_(wrap(a[1], g.numel));
    if (swap_master_) window(master, g.offset, g.numel).copy_(wrap(a[2], g.numel));
  });
}

void SwappedAdam::write_all(const at::Tensor& master, const at::Tensor& exp_avg,
                            const at::Tensor& exp_avg_sq) {
  resident_exp_avg_.copy_(window(exp_avg, 0, resident_numel_));
  resident_exp_avg_sq_.copy_(window(exp_avg_sq, 0, resident_numel_));
  if (swap_master_) resident_master_.copy_(window(master, 0, resident_numel_));
  if (!swapper_) return;
  swapper_->initialize([&](size_t, const offload::SubGroup& g, float* const* a) {
    wrap(a[0], g.numel).copy_(window(exp_avg, g.offset, g.numel));
    wrap(a[1], g.numel).copy_(window(exp_avg_sq, g.offset, g.numel));
    if (swap_master_) wrap(a[2], g.numel).copy_(window(master, g.offset, g.numel));
  });
}

}  // namespace deepshard::zero
