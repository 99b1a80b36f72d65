// Engine::save_checkpoint and Engine::load_checkpoint: the collective protocol around the stages'
// state views (agreement, shard files, manifest, publish), docs/checkpoint.md.
#include "deepshard/checkpoint/engine_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "checkpoint/tag_directory.h"
#include "comm/powersgd.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "optim/adam.h"
#include "util/fault_injection.h"
#include "util/log.h"
#include "zero/engine_base.h"
#include "zero/grad_compression.h"
#include "zero/rank_agreement.h"
#include "zero/tag_validation.h"

namespace deepshard::zero {
namespace {

using checkpoint::StateKind;

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    default:
      return c10::toString(type);
  }
}

// One of this rank's trainable parameters as the checkpoint sees it: the whole parameter's entry
// in the table (whole shape, how it is split) and the part of it this rank holds.
struct LocalParam {
  checkpoint::ParamInfo info;
  checkpoint::TensorSlice slice;
};

// This rank's trainable parameters (tied ones once), in the model's order.
std::vector<LocalParam> local_parameters(torch::nn::Module& model, const CheckpointLayout& layout) {
  std::vector<LocalParam> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    const checkpoint::TensorSlice slice =
        layout.slice ? layout.slice(item.key()) : checkpoint::TensorSlice{};
    checkpoint::ParamInfo info{item.key(), checkpoint::whole_shape(p.sizes().vec(), slice),
                               dtype_name(p.scalar_type())};
    if (slice.split()) {
      info.split_dim = slice.dim;
      info.split_blocks = slice.blocks;
    }
    out.push_back({std::move(info), slice});
  }
  return out;
}

const LocalParam& find_local(const std::vector<LocalParam>& local, const std::string& name) {
  for (const auto& p : local)
    if (p.info.name == name) return p;
  throw Error("checkpoint: the engine's state names '" + name + "', not a parameter of the model");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The whole model's parameter table: the union of every rank's parameters (a pipeline stage holds
// only its own), in rank order, so in the model's order. Collective over `job`. Two ranks holding
// the same parameter with different whole shapes is an Error (a layout bug).
std::vector<checkpoint::ParamInfo> job_parameter_table(comm::Group& job,
                                                       const std::vector<LocalParam>& local) {
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& p : local) mine.push_back(checkpoint::param_to_json(p.info));
  std::vector<checkpoint::ParamInfo> out;
  for (const std::string& text : all_gather_text(job, mine.dump())) {
    for (const auto& j : nlohmann::json::parse(text)) {
      checkpoint::ParamInfo info = checkpoint::param_from_json(j);
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const checkpoint::ParamInfo& p) { return p.name == info.name; });
      if (it == out.end()) {
        out.push_back(std::move(info));
        continue;
      }
      DS_CHECK(it->shape == info.shape, Error, "checkpoint: parameter '", info.name, "' is ",
               shape_text(it->shape), " on one rank and ", shape_text(info.shape),
               " on another (whole shapes)");
    }
  }
  return out;
}

// The checkpoint holds exactly the model's parameters, with the same (whole) shapes.
void check_same_model(const checkpoint::CheckpointReader& reader,
                      const std::vector<checkpoint::ParamInfo>& model) {
  const std::string where = reader.path() + "/" + checkpoint::kManifestName;
  for (const auto& p : model) {
    const checkpoint::ParamInfo* saved = nullptr;
    for (const auto& s : reader.parameters())
      if (s.name == p.name) saved = &s;
    DS_CHECK(saved != nullptr, IoError, where, ": checkpoint of a different model: parameter '",
             p.name, "' of this model is not in the checkpoint");
    DS_CHECK(saved->shape == p.shape, IoError, where,
             ": checkpoint of a different model: parameter '", p.name, "' has shape ",
             shape_text(saved->shape), " in the checkpoint but ", shape_text(p.shape),
             " in this model");
  }
  for (const auto& s : reader.parameters()) {
    bool known = false;
    for (const auto& p : model) known = known || p.name == s.name;
    DS_CHECK(known, IoError, where, ": checkpoint of a different model: its parameter '", s.name,
             "' is not in this model");
  }
}

// "data 2 x pipeline 1 x tensor 2".
std::string layout_text(const nlohmann::json& layout) {
  return detail::concat("data ", layout.at("data").get<int>(), " x pipeline ",
                        layout.at("pipeline").get<int>(), " x tensor ",
                        layout.at("tensor").get<int>());
}

std::string to_hex(const at::Tensor& bytes) {
  static const char* digits = "0123456789abcdef";
  const auto* p = bytes.contiguous().data_ptr<uint8_t>();
  std::string out;
  out.reserve(2 * bytes.numel());
  for (int64_t i = 0; i < bytes.numel(); ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

at::Tensor from_hex(const std::string& hex) {
  DS_CHECK(hex.size() % 2 == 0, IoError, "RNG state: odd hex length");
  at::Tensor out = at::empty({static_cast<int64_t>(hex.size() / 2)}, at::kByte);
  auto* p = out.data_ptr<uint8_t>();
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw IoError("RNG state: bad hex digit");
  };
  for (size_t i = 0; i < hex.size() / 2; ++i)
    p[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return out;
}

std::string cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return to_hex(gen.get_state());
}

void set_cpu_rng_state(const std::string& hex) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(from_hex(hex));
}

constexpr const char* kModuleStateName = "module_state.safetensors";

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Runs `fn`, returning "" or its exception's message.
template <typename Fn>
std::string capture(Fn&& fn) {
  try {
    fn();
  } catch (...) {
    std::string message = what_of(std::current_exception());
    return message.empty() ? "error" : message;
  }
  return "";
}

// Module state (buffers, frozen parameters) is written by rank 0 alone from its own copies. With
// a pipeline rank 0 holds the first stage's only (another stage's buffers are copies it never
// updates, its frozen parameters are released there); with tensor parallelism a frozen split
// parameter is a slice. Neither model has module state; such a checkpoint is refused rather than
// written wrong (docs/checkpoint.md, "Pipeline layouts"). Throws Error naming the tensor.
void check_module_state_checkpointable(const ModuleState& state, const CheckpointLayout& layout) {
  for (const auto& [name, tensor] : state.tensors()) {
    DS_CHECK(layout.pipeline <= 1, Error, "checkpoint: '", name,
             "' is module state (a buffer or frozen parameter) of a pipeline of ", layout.pipeline,
             " stages: rank 0 would write its own copy for every stage; not built yet "
             "(docs/checkpoint.md, \"Pipeline layouts\")");
    DS_CHECK(!layout.slice || !layout.slice(name).split(), Error, "checkpoint: '", name,
             "' is a frozen parameter split over ", layout.tensor,
             " tensor ranks: rank 0 would write its slice as the whole; not built yet "
             "(docs/checkpoint.md, \"Tensor-parallel layout\")");
  }
}

}  // namespace

void EngineBase::load_module_state(const checkpoint::CheckpointReader& reader) {
  const nlohmann::json& m = reader.manifest();
  const std::string file =
      m.contains("module_state") ? m.at("module_state").get<std::string>() : "";
  if (file.empty()) {
    DS_CHECK(module_state_.empty(), IoError, reader.path(),
             ": checkpoint of a different model: ", "it holds no module state, but this model has ",
             module_state_.tensors().front().first, " (a buffer or frozen parameter)");
    return;
  }
  module_state_.load(reader.path() + "/" + file);
}

void EngineBase::set_checkpoint_layout(CheckpointLayout layout) {
  DS_CHECK(layout.job != nullptr && layout.slice, Error,
           "set_checkpoint_layout: no job group or no slice() function");
  DS_CHECK(layout.data * layout.pipeline * layout.tensor == layout.job->size() &&
               layout.data == group_.size(),
           Error, "set_checkpoint_layout: data ", layout.data, " x pipeline ", layout.pipeline,
           " x tensor ", layout.tensor, " for a job of ", layout.job->size(),
           " ranks and an engine group of ", group_.size());
  checkpoint_layout_ = std::move(layout);
}

comm::Group& EngineBase::checkpoint_job() {
  return checkpoint_layout_.job ? *checkpoint_layout_.job : group_;
}

nlohmann::json EngineBase::checkpoint_layout_json() const {
  const CheckpointLayout& l = checkpoint_layout_;
  if (!l.job) return {{"data", group_.size()}, {"pipeline", 1}, {"tensor", 1}};
  return {{"data", l.data}, {"pipeline", l.pipeline}, {"tensor", l.tensor}};
}

void EngineBase::save_checkpoint(const std::string& dir, const std::string& requested_tag,
                                 const std::string& client_state_json) {
  torch::NoGradGuard no_grad;
  // The protocol runs over the whole job (with model parallelism the engine's group is one data
  // axis; docs/checkpoint.md).
  comm::Group& job = checkpoint_job();
  const std::string tag = agree_on_save(job, dir, requested_tag, config_.checkpoint.tag_validation);
  DS_CHECK(micro_steps_ % config_.gradient_accumulation_steps == 0, Error,
           "save_checkpoint: inside a gradient accumulation window (micro-step ",
           micro_steps_ % config_.gradient_accumulation_steps, " of ",
           config_.gradient_accumulation_steps, "); save after the step() that ends the window");
  const int rank = job.rank(), world = job.size();
  const std::vector<LocalParam> local = local_parameters(*model_, checkpoint_layout_);
  const std::vector<checkpoint::ParamInfo> table = job_parameter_table(job, local);
  nlohmann::json client;
  std::string error = capture([&] {
    client = nlohmann::json::parse(client_state_json);
    DS_CHECK(client.is_object(), Error, "save_checkpoint: client state is not a JSON object");
    check_module_state_checkpointable(module_state_, checkpoint_layout_);
    if (rank == 0) checkpoint::begin_tag(dir, tag);
  });
  check_all_succeeded(job, "save_checkpoint: preparing " + dir + "/" + tag + ".tmp", error);
  const std::string tmp_dir = checkpoint::tag_path(dir, tag + ".tmp");

  error = capture([&] {
    std::vector<checkpoint::StateRecord> records;
    for (const StatePiece& p : state_view(StateUse::kSave)) {
      const LocalParam& param = find_local(local, p.name);
      if (!param.slice.writes) continue;  // another rank writes it (a replicated parameter)
      // This rank's piece of its slice is one or more ranges of the whole parameter.
      int64_t at = 0;
      for (const auto& [b, e] :
           checkpoint::whole_ranges(param.info.shape, param.slice, p.begin, p.end)) {
        records.push_back({p.name, b, e, StateKind::kFp32, p.master.narrow(0, at, e - b)});
        records.push_back({p.name, b, e, StateKind::kExpAvg, p.exp_avg.narrow(0, at, e - b)});
        records.push_back({p.name, b, e, StateKind::kExpAvgSq, p.exp_avg_sq.narrow(0, at, e - b)});
        at += e - b;
      }
    }
    if (auto* faults = testing::fault_injection()) faults->before_shard_write(rank, tag);
    checkpoint::write_rank_shard(tmp_dir, rank, world, records);
    if (compression_) save_compression_state(*compression_, tmp_dir, rank);
    // Buffers and frozen parameters are the same on every rank: rank 0 writes them.
    if (rank == 0 && !module_state_.empty()) module_state_.save(tmp_dir + "/" + kModuleStateName);
  });
  // Every rank's RNG state travels with its status.
  const auto reports =
      all_gather_text(job, nlohmann::json{{"error", error}, {"rng", cpu_rng_state()}}.dump());
  std::string failures;
  std::vector<std::string> rng;
  for (size_t r = 0; r < reports.size(); ++r) {
    const auto report = nlohmann::json::parse(reports[r]);
    rng.push_back(report.at("rng").get<std::string>());
    const auto e = report.at("error").get<std::string>();
    if (!e.empty()) failures += detail::concat("\n  rank ", r, ": ", e);
  }
  if (!failures.empty()) {
    if (rank == 0) checkpoint::abort_tag(dir, tag);
    throw Error("save_checkpoint: writing " + tmp_dir + " failed" + failures);
  }

  error = capture([&] {
    if (rank != 0) return;
    nlohmann::json params = nlohmann::json::array();
    for (const auto& p : table) params.push_back(checkpoint::param_to_json(p));
    nlohmann::json shards = nlohmann::json::array();
    for (int r = 0; r < world; ++r) shards.push_back(checkpoint::shard_file_name(r));
    const auto& s = scaler_.state();
    nlohmann::json manifest = {{"format", "deepshard checkpoint"},
                               {"format_version", checkpoint::kCheckpointFormatVersion},
                               {"tag", tag},
                               {"world_size", world},
                               {"layout", checkpoint_layout_json()},
                               {"zero_stage", config_.zero.stage},
                               {"parameters", params},
                               {"shards", shards},
                               {"engine",
                                {{"global_steps", global_steps_},
                                 {"skipped_steps", skipped_steps_},
                                 {"applied_steps", applied_steps_},
                                 {"micro_steps", micro_steps_},
                                 {"optimizer_step", optimizer().step_count()},
                                 {"lr", current_lr()},
                                 {"loss_scaler",
                                  {{"dynamic", scaler_.is_dynamic()},
                                   {"cur_scale", s.cur_scale},
                                   {"cur_iter", s.cur_iter},
                                   {"last_overflow_iter", s.last_overflow_iter},
                                   {"cur_hysteresis", s.cur_hysteresis}}}}},
                               {"rng", {{"cpu", rng}}},
                               {"client_state", client},
                               {"module_state", module_state_.empty() ? "" : kModuleStateName},
                               {"compression", compression_ ? "powerSGD" : ""},
                               {"config", config::to_json(config_)}};
    checkpoint::write_manifest(tmp_dir, manifest);
    checkpoint::publish_tag(dir, tag);
  });
  if (rank == 0 && !error.empty()) checkpoint::abort_tag(dir, tag);
  check_all_succeeded(job, "save_checkpoint: publishing " + tmp_dir, error);
}

void EngineBase::load_compression(const checkpoint::CheckpointReader& reader) {
  const nlohmann::json& m = reader.manifest();
  if (m.value("compression", std::string()).empty()) {
    if (group_.rank() == 0) {
      log::warn("compression: ", reader.path(),
                " was saved without PowerSGD; its error feedback "
                "and Q matrices start fresh");
    }
    return;
  }
  load_compression_state(*compression_, reader.path(), group_.rank(), group_.size(),
                         reader.world_size());
}

LoadedCheckpoint EngineBase::load_checkpoint(const std::string& dir, const std::string& tag) {
  torch::NoGradGuard no_grad;
  comm::Group& job = checkpoint_job();
  std::string path;
  std::string error = capture([&] { path = checkpoint::resolve_tag(dir, tag); });
  agree_on_operation(job, detail::concat("load_checkpoint(dir '", dir, "', tag '", tag, "') -> ",
                                         error.empty() ? path : "error: " + error));
  check_all_succeeded(job, "load_checkpoint", error);
  DS_CHECK(micro_steps_ % config_.gradient_accumulation_steps == 0, Error,
           "load_checkpoint: inside a gradient accumulation window");

  const std::vector<LocalParam> local = local_parameters(*model_, checkpoint_layout_);
  const std::vector<checkpoint::ParamInfo> table = job_parameter_table(job, local);
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  error = capture([&] {
    check_module_state_checkpointable(module_state_, checkpoint_layout_);
    reader = std::make_unique<checkpoint::CheckpointReader>(path);
    check_same_model(*reader, table);
    // Each piece of this rank's slice is read from the ranges of the whole parameter holding it,
    // whatever layout saved them.
    for (const StatePiece& p : state_view(StateUse::kLoad)) {
      const LocalParam& param = find_local(local, p.name);
      const auto ranges = checkpoint::whole_ranges(param.info.shape, param.slice, p.begin, p.end);
      p.master.copy_(reader->read_ranges(p.name, StateKind::kFp32, ranges));
      p.exp_avg.copy_(reader->read_ranges(p.name, StateKind::kExpAvg, ranges));
      p.exp_avg_sq.copy_(reader->read_ranges(p.name, StateKind::kExpAvgSq, ranges));
    }
  });
  check_all_succeeded(job, "load_checkpoint " + path, error);
  publish_loaded_state();
  error = capture([&] {
    load_module_state(*reader);
    if (compression_) load_compression(*reader);
  });
  check_all_succeeded(job, "load_checkpoint " + path, error);

  const nlohmann::json& m = reader->manifest();
  LoadedCheckpoint out;
  error = capture([&] {
    const auto& e = m.at("engine");
    global_steps_ = e.at("global_steps").get<int64_t>();
    skipped_steps_ = e.at("skipped_steps").get<int64_t>();
    applied_steps_ = e.at("applied_steps").get<int64_t>();
    // The saved run may have used another accumulation count: count this run's micro-steps.
    micro_steps_ = global_steps_ * config_.gradient_accumulation_steps;
    optimizer().set_step_count(e.at("optimizer_step").get<int64_t>());
    const auto& ls = e.at("loss_scaler");
    optim::LossScalerState state;
    state.cur_scale = ls.at("cur_scale").get<double>();
    state.cur_iter = ls.at("cur_iter").get<int64_t>();
    state.last_overflow_iter = ls.at("last_overflow_iter").get<int64_t>();
    state.cur_hysteresis = ls.at("cur_hysteresis").get<int>();
    if (scaler_.is_dynamic() && ls.at("dynamic").get<bool>()) scaler_.set_state(state);
    out.saved_world_size = reader->world_size();
    out.saved_stage = reader->zero_stage();
    // Checkpoints from before the layout field are data-parallel ones.
    const nlohmann::json saved_layout =
        m.contains("layout")
            ? m.at("layout")
            : nlohmann::json{{"data", out.saved_world_size}, {"pipeline", 1}, {"tensor", 1}};
    out.saved_layout = layout_text(saved_layout);
    // Rank r's RNG state is rank r's only on the same grid.
    if (out.saved_world_size == job.size() && saved_layout == checkpoint_layout_json())
      set_cpu_rng_state(m.at("rng").at("cpu").at(job.rank()).get<std::string>());
    out.path = path;
    out.tag = m.at("tag").get<std::string>();
    out.client_state_json = m.at("client_state").dump();
    out.global_steps = global_steps_;
  });
  check_all_succeeded(job, "load_checkpoint " + path, error);
  return out;
}

}  // namespace deepshard::zero
