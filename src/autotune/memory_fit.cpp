// The tuner's memory prediction (memory_fit.h).
#include "autotune/memory_fit.h"

#include <algorithm>
#include <fstream>

#include "autotune/trial_runner.h"
#include "deepshard/train/model_factory.h"
#include "deepshard/util/error.h"
#include "models/registry.h"
#include "zero/estimator.h"

namespace deepshard::autotune {
namespace {

int64_t field(const nlohmann::json& j, const char* key) { return j.value(key, int64_t{0}); }

}  // namespace

ModelInfo model_info_from_run(const std::string& run_dir, int64_t micro_batch, int64_t start_step,
                              int64_t end_step) {
  const ExperimentResult measured = read_trial_metrics(run_dir, start_step, end_step);
  std::ifstream in(run_dir + "/summary.json");
  const auto summary = nlohmann::json::parse(in);
  const auto& p = summary.at("memory_profile");
  ModelInfo info;
  info.num_params = summary.at("num_parameters").get<int64_t>();
  const int64_t activations =
      std::max(field(p, "activations_kept"), field(p, "activations_transient"));
  info.activation_bytes_per_sample = activations / std::max<int64_t>(1, micro_batch);
  info.gathered_bytes = field(p, "gathered_params");
  info.peak_rss = field(p, "rss");
  const int64_t counted = field(p, "parameters") + field(p, "gradients") +
                          field(p, "master_weights") + field(p, "optimizer_state") +
                          field(p, "comm_buffers") + info.gathered_bytes + activations;
  info.baseline_bytes = std::max<int64_t>(0, info.peak_rss - counted);
  info.step_s = measured.latency_ms / 1e3;
  info.compute_s = measured.compute_s;
  return info;
}

nlohmann::json to_json(const ModelInfo& i) {
  return {{"num_params", i.num_params},
          {"activation_mem_per_gpu", i.activation_bytes_per_sample},
          {"gathered_bytes", i.gathered_bytes},
          {"baseline_bytes", i.baseline_bytes},
          {"peak_rss_bytes", i.peak_rss},
          {"step_s", i.step_s},
          {"compute_s", i.compute_s}};
}

ModelInfo model_info_from_json(const nlohmann::json& j) {
  ModelInfo i;
  i.num_params = j.at("num_params").get<int64_t>();
  i.activation_bytes_per_sample = j.at("activation_mem_per_gpu").get<int64_t>();
  i.gathered_bytes = j.at("gathered_bytes").get<int64_t>();
  i.baseline_bytes = j.at("baseline_bytes").get<int64_t>();
  i.peak_rss = j.at("peak_rss_bytes").get<int64_t>();
  i.step_s = j.at("step_s").get<double>();
  i.compute_s = j.at("compute_s").get<double>();
  return i;
}

MemoryPrediction predict_memory(const ModelInfo& info, const config::RunConfig& run,
                                int64_t ranks) {
  const int64_t dp = std::max<int64_t>(1, ranks / run.parallel.model_ranks());
  // fp16 on a CPU keeps fp32 parameters (the trainer's rule); bf16 computes in bf16.
  const config::DType param_dtype =
      run.ds.model_dtype() == config::DType::kBf16 ? config::DType::kBf16 : config::DType::kFp32;
  const int64_t params_per_replica = info.num_params / run.parallel.model_ranks();
  const auto in = zero::estimate_input(run.ds, params_per_replica, dp, param_dtype);
  const auto e = zero::estimate_model_states(in);
  const int64_t on_nvme =
      e.params_at.nvme + e.grads_at.nvme + e.master_at.nvme + e.optimizer_at.nvme;
  MemoryPrediction p;
  p.model_states = e.total() - on_nvme;  // host-offloaded state is resident memory on a CPU
  p.buffers = e.comm_buffers + e.swap_buffers + (run.ds.zero.stage == 3 ? info.gathered_bytes : 0);
  double per_sample = double(info.activation_bytes_per_sample);
  const models::ArchEntry& arch = models::find_arch(run.model.arch);
  if (run.train.activation_checkpointing && arch.estimate_activations != nullptr) {
    const auto a = arch.estimate_activations(run.model, 1, run.model.block_size,
                                             zero::dtype_bytes(param_dtype),
                                             run.ds.activation_checkpointing.number_checkpoints);
    if (a.plain > 0) per_sample *= double(a.checkpointed) / double(a.plain);
  }
  p.activations = static_cast<int64_t>(per_sample * double(run.ds.train_micro_batch_size_per_gpu));
  p.baseline = info.baseline_bytes;
  return p;
}

std::optional<int64_t> largest_fit_by_measured_peaks(const std::vector<MeasuredPeak>& peaks,
                                                     int64_t budget) {
  const MeasuredPeak* largest = nullptr;
  const MeasuredPeak* second = nullptr;
  for (const MeasuredPeak& p : peaks) {
    if (p.peak_rss <= 0) continue;
    if (!largest || p.micro_batch > largest->micro_batch) {
      if (largest) second = largest;
      largest = &p;
    } else if (p.micro_batch < largest->micro_batch &&
               (!second || p.micro_batch > second->micro_batch)) {
      second = &p;
    }
  }
  if (!largest || !second) return std::nullopt;
  const double slope = static_cast<double>(largest->peak_rss - second->peak_rss) /
                       static_cast<double>(largest->micro_batch - second->micro_batch);
  if (slope <= 0) return std::nullopt;
  const double room = (1.0 - kMeasuredFitHeadroom) * static_cast<double>(budget) -
                      static_cast<double>(largest->peak_rss);
  if (room < slope) return std::nullopt;
  return largest->micro_batch + static_cast<int64_t>(room / slope);
}

}  // namespace deepshard::autotune
