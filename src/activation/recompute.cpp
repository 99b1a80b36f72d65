// The recompute function (a torch::autograd::Function, libtorch 1.13 has no checkpoint of its
// own) and checkpoint(), the model's entry point (see checkpoint.h). Forward: capture the random
// generators' states, keep the inputs as the options say, run the region without a graph.
// Backward: restore the inputs and generator states, run the region again with gradients on,
// back-propagate the incoming gradient through it (parameters accumulate their gradients as
// usual; under ZeRO-3 the engine's pre-backward hook on the region's output has gathered them
// already), and return the inputs' gradients.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <chrono>

#include "activation/activation_meter.h"
#include "activation/checkpoint.h"
#include "activation/checkpointer_state.h"
#include "activation/kept_input.h"
#include "activation/rng_state.h"
#include "deepshard/util/error.h"
#include "util/log.h"
#include "util/stopwatch.h"

namespace deepshard::activation {
namespace {

using Clock = std::chrono::steady_clock;

// synchronize_checkpoint_boundary: waits for the work queued on the inputs' accelerators (CPU
// compute is synchronous: nothing to wait for).
void synchronize(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.device().is_cpu()) continue;
    const auto* impl = c10::impl::getDeviceGuardImpl(t.device().type());
    impl->getStream(t.device()).synchronize();
  }
}

// One checkpointed call of a region: everything its backward needs.
struct RegionCall : public torch::CustomClassHolder {
  Region region;
  int64_t index = 0;
  std::shared_ptr<Checkpointer::State> owner;
  std::vector<KeptInput> kept;
  std::vector<bool> needs_grad;
  RngSnapshot rng;
  bool done = false;
};

struct RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx,
                            c10::intrusive_ptr<RegionCall> call, at::TensorList inputs) {
    auto& state = *call->owner;
    const auto& options = state.options;
    std::vector<at::Tensor> args(inputs.begin(), inputs.end());
    if (options.synchronize_checkpoint_boundary) synchronize(args);
    const auto t0 = Clock::now();
    call->rng = RngSnapshot::capture(args);
    at::Tensor out = call->region(args);  // Function::apply runs forward without a graph
    KeepOptions keep;
    keep.partition = options.partition_activations;
    keep.host = options.cpu_checkpointing;
    keep.group = state.group;
    keep.contiguous = options.contiguous_memory_optimization ? &state.contiguous : nullptr;
    keep.region = call->index;
    for (size_t i = 0; i < args.size(); ++i) {
      call->needs_grad.push_back(args[i].defined() && args[i].requires_grad());
      call->kept.push_back(keep_input(args[i], i, keep));
      if (!call->kept.back().as_is)
        state.kept_bytes += call->kept.back().bytes();
      else if (args[i].defined())
        state.kept_bytes += args[i].numel() * args[i].element_size();
    }
    if (options.cpu_checkpointing && !state.said_host && !args.empty() &&
        args[0].device().is_cpu()) {
      state.said_host = true;
      log::info(
          "activation_checkpointing.cpu_checkpointing: the compute device is the host, the "
          "kept inputs are in host memory already");
    }
    ctx->saved_data["call"] = c10::IValue::make_capsule(call);
    if (!out.is_floating_point()) ctx->mark_non_differentiable({out});
    if (options.profile)
      state.add_time(call->index, &RegionTimes::forward_s, util::seconds_since(t0));
    if (options.synchronize_checkpoint_boundary) synchronize({out});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto call = c10::static_intrusive_pointer_cast<RegionCall>(ctx->saved_data["call"].toCapsule());
    DS_CHECK(!call->done, Error,
             "activation checkpointing: a checkpointed region was back-propagated twice "
             "(retain_graph is not supported: the region's kept inputs are freed by its backward)");
    call->done = true;
    auto& state = *call->owner;
    const auto& options = state.options;
    if (options.synchronize_checkpoint_boundary) synchronize(grads);
    std::vector<at::Tensor> inputs;
    for (size_t i = 0; i < call->kept.size(); ++i) {
      at::Tensor x = restore_input(call->kept[i], state.group, i);
      if (x.defined()) x = x.detach().requires_grad_(call->needs_grad[i]);
      inputs.push_back(x);
    }
    call->kept.clear();  // the kept copies go now; `inputs` hold what the recompute needs
    const auto t0 = Clock::now();
    at::Tensor out;
    {
      ActivationMeter::Window window(ActivationMeter::on_this_thread());
      RngSwap rng(call->rng);
      torch::AutoGradMode grad_on(true);
      out = call->region(inputs);
    }
    const auto t1 = Clock::now();
    if (out.requires_grad() && grads[0].defined()) torch::autograd::backward({out}, {grads[0]});
    out = at::Tensor();
    if (options.profile) {
      state.add_time(call->index, &RegionTimes::recompute_s,
                     std::chrono::duration<double>(t1 - t0).count());
      state.add_time(call->index, &RegionTimes::backward_s, util::seconds_since(t1));
    }
    torch::autograd::variable_list result{at::Tensor()};  // the call argument
    for (size_t i = 0; i < inputs.size(); ++i)
      result.push_back(call->needs_grad[i] ? inputs[i].grad() : at::Tensor());
    if (options.synchronize_checkpoint_boundary) synchronize(result);
    return result;
  }
};

}  // namespace

thread_local Checkpointer* t_active = nullptr;  // shared with checkpointer.cpp

Checkpointer* active_checkpointer() { return t_active; }

at::Tensor checkpoint(const Region& region, const std::vector<at::Tensor>& inputs) {
  Checkpointer* active = t_active;
  if (active == nullptr || !torch::GradMode::is_enabled()) return region(inputs);
  auto& state = *active->state();
  const int64_t index = state.next_region++;
  const auto& limit = state.options.number_checkpoints;
  if (limit && index >= *limit) return region(inputs);  // beyond number_checkpoints
  bool any_grad = false;
  for (const at::Tensor& t : inputs) any_grad = any_grad || (t.defined() && t.requires_grad());
  if (!any_grad) {
    // Nothing would call the recompute's backward, so the parameters inside would get no
    // gradient (torch.utils.checkpoint's reentrant pitfall): run it as it is.
    if (!state.warned_no_grad) {
      state.warned_no_grad = true;
      log::warn(
          "activation checkpointing: a region's inputs need no gradient; it runs without "
          "checkpointing");
    }
    return region(inputs);
  }
  auto call = c10::make_intrusive<RegionCall>();
  call->region = region;
  call->index = index;
  call->owner = active->state();
  ++state.regions;
  return RecomputeFunction::apply(call, at::TensorList(inputs));
}

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& region,
                      const at::Tensor& input) {
  return checkpoint([region](const std::vector<at::Tensor>& in) { return region(in[0]); },
                    std::vector<at::Tensor>{input});
}

}  // namespace deepshard::activation
