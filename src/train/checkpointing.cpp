// Checkpoints of a training run: the resume step (train.resume: "auto", a tag or a tag folder)
// and the checkpoint hook (every train.save_interval steps, after the last step, and when a stop
// signal came).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/tag_directory.h"
#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/util/error.h"
#include "train/data_fingerprint.h"
#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {
namespace {

// Loads the checkpoint train.resume names into the engine; returns the steps already done.
// `data_path`: the training data, whose fingerprint (data_fingerprint.h) must be the one saved.
int64_t resume_from(const config::TrainConfig& train, const std::string& checkpoint_dir,
                    const std::string& data_path, zero::Engine& engine, bool rank0) {
  namespace fs = std::filesystem;
  std::string dir = checkpoint_dir, tag;
  if (train.resume == "auto") {
    if (!checkpoint::read_latest(checkpoint_dir)) {
      if (rank0) log::info("resume auto: no checkpoint in ", checkpoint_dir, "; starting fresh");
      return 0;
    }
  } else if (fs::exists(fs::path(train.resume) / checkpoint::kManifestName)) {
    const fs::path path = fs::path(train.resume).lexically_normal();
    const fs::path p = path.has_filename() ? path : path.parent_path();
    dir = p.parent_path().string();
    tag = p.filename().string();
  } else {
    tag = train.resume;
  }
  const auto t0 = Clock::now();
  const zero::LoadedCheckpoint loaded = engine.load_checkpoint(dir, tag);
  const auto client = nlohmann::json::parse(loaded.client_state_json);
  const int64_t step = client.value("step", loaded.global_steps);
  const std::string saved = client.value("data_train_fingerprint", std::string());
  if (!saved.empty()) {
    const std::string now = data_fingerprint(data_path);
    DS_CHECK(saved == now, Error, "resume: the training data ", data_path, " changed since ",
             loaded.path, " was saved (", saved, " then, ", now,
             " now): the resumed run would not see the batches the interrupted one would have; "
             "restore the file, or start afresh (train.resume \"\")");
  }
  if (rank0)
    log::info("resumed from ", loaded.path, " (saved by ", loaded.saved_world_size,
              " rank(s) at ZeRO stage ", loaded.saved_stage, ", ", loaded.saved_layout,
              ") at step ", step, " in ", seconds_since(t0), " s");
  return step;
}

// With a rank grid, a checkpoint is the whole job's (docs/checkpoint.md, "Tensor-parallel layout",
// "Pipeline layouts"): the protocol runs over the job's group, every record is a range of a whole
// parameter (a tensor rank's slice maps to ranges by the model's tensor-parallel plan), and a
// parameter held by several ranks is written by one: a replicated one by tensor rank 0, the
// embedding the head is tied to (held by the first and the last pipeline stage) by the first
// stage.
void declare_checkpoint_layout(TrainingRun& run) {
  if (!run.axes) return;
  const parallel::RankGrid& grid = run.axes->grid;
  const int t = run.axes->coord.tensor, n = grid.tensor_size();
  const int stage = run.axes->coord.pipeline;
  // The embedding weight the last stage holds a copy of ("" without a pipeline or untied).
  const std::string tied = run.pipeline ? run.pipeline->stage().tied_name() : std::string();
  zero::CheckpointLayout layout;
  layout.job = &run.group;
  const sharding::TensorPlan plan =
      run.tensor_parallel ? run.tensor_parallel->tensor_plan() : sharding::TensorPlan();
  layout.slice = [t, n, stage, tied, plan](const std::string& name) {
    checkpoint::TensorSlice slice;
    if (n > 1) {
      slice.dim = plan.split_dim(name);
      // Fused q, k and v rows: three blocks, each split over the tensor ranks.
      slice.blocks = plan.split(name) == sharding::TensorSplit::kQkvRows ? 3 : 1;
      slice.rank = t;
      slice.size = n;
    }
    slice.writes = (slice.dim >= 0 || t == 0) && !(stage > 0 && name == tied);
    return slice;
  };
  layout.data = grid.data_size();
  layout.pipeline = grid.pipeline_size();
  layout.tensor = n;
  run.engine->set_checkpoint_layout(std::move(layout));
}

int64_t directory_bytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  return total;
}

// The client state saved with each checkpoint: what `generate --checkpoint` and resume read.
nlohmann::json client_state(const TrainingRun& run, int64_t step, const std::string& fingerprint) {
  return {{"step", step},
          {"seed", run.config.train.seed},
          {"data_train", run.config.data.train},
          {"data_train_fingerprint", fingerprint},
          {"world_size", run.group.size()},
          {"run_config", nlohmann::json::parse(run.config.resolved_json)},
          {"model", saved_model_json(run.config.model)}};
}

class CheckpointHook : public StepHook {
 public:
  void after_step(TrainingRun& run, StepRecord& step) override {
    const auto& train = run.config.train;
    const bool periodic =
        train.save_interval > 0 && (step.step % train.save_interval == 0 || step.last);
    if (run.checkpointing && (periodic || step.stop)) save(run, step.step);
    if (step.stop && run.rank0)
      log::info("stop requested (signal): stopped after step ", step.step, " of ", train.steps,
                run.checkpointing ? ", checkpoint saved" : "");
  }

 private:
  void save(TrainingRun& run, int64_t step) {
    const std::string tag = "step" + std::to_string(step);
    if (fingerprint_.empty()) fingerprint_ = data_fingerprint(run.config.data.train);
    const auto s0 = Clock::now();
    run.engine->save_checkpoint(run.checkpoint_dir, tag,
                                client_state(run, step, fingerprint_).dump());
    if (!run.rank0) return;
    const double seconds = seconds_since(s0);
    const std::string path = checkpoint::tag_path(run.checkpoint_dir, tag);
    const double mb = directory_bytes(path) / 1e6;
    log::info("saved checkpoint ", path, ": ", mb, " MB in ", seconds, " s (", mb / seconds,
              " MB/s)");
  }
  std::string fingerprint_;  // of the training data, taken at the first save
};

}  // namespace

void resume(TrainingRun& run) {
  declare_checkpoint_layout(run);
  const auto& train = run.config.train;
  run.checkpointing = train.save_interval > 0 || !train.checkpoint_dir.empty();
  run.checkpoint_dir =
      train.checkpoint_dir.empty() ? train.run_dir + "/checkpoints" : train.checkpoint_dir;
  if (!train.resume.empty())
    run.start_step =
        resume_from(train, run.checkpoint_dir, run.config.data.train, *run.engine, run.rank0);
}

std::unique_ptr<StepHook> make_checkpoint_hook() { return std::make_unique<CheckpointHook>(); }

}  // namespace deepshard::train
