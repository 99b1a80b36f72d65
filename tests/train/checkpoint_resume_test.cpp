// Checkpoints end to end with real ranks (`deepshard launch -n N -- deepshard train`): exact resume
// (train 20 = train 10, save, new processes, load, train 10: the same losses bit for bit) at every
// stage, in bf16/fp16 and mid-PowerSGD-compression; resharding across world sizes and stages
// (within 1e-4 of the uninterrupted run; also for the Llama model) and between model-parallel and
// data-parallel layouts (tables of {saved layout, resumed layout}: tensor 2 x data 2 <-> data 4,
// pipeline 2 <-> data 2, tensor 2 x pipeline 2 <-> data 4, ...); a rank killed during
// a save leaves the previous `latest` loadable; SIGTERM finishes the step, saves and exits 0;
// damaged or foreign checkpoints fail naming the file.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>

#include "launch/subprocess.h"
#include "train/llama_run.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace checkpoint_resume_test {

namespace fs = std::filesystem;

// A rank grid and the ZeRO stage over its data axis. Global batch 8 = micro x accumulation x
// data: accumulation 2 (4 micro-batches through a pipeline without data parallelism).
struct Layout {
  int data = 1, pipeline = 1, tensor = 1, stage = 0;

  int ranks() const { return data * pipeline * tensor; }
  int64_t accumulation() const { return pipeline > 1 && data == 1 ? 4 : 2; }
  int64_t micro() const { return 8 / data / accumulation(); }
  // The run config's sections for the model-parallel axes.
  std::string sections() const {
    nlohmann::json j = nlohmann::json::object();
    if (tensor > 1) j["tensor_parallel"] = {{"enabled", true}, {"size", tensor}};
    if (pipeline > 1) j["pipeline"] = {{"enabled", true}, {"stages", pipeline}};
    return j.dump();
  }
  // "tensor 2 x pipeline 2 stage 1": the axes above 1 (data 1 when none is).
  std::string text() const {
    std::string out;
    for (auto [axis, size] : {std::pair{"tensor", tensor}, {"pipeline", pipeline}, {"data", data}})
      if (size > 1)
        out += (out.empty() ? "" : " x ") + std::string(axis) + " " + std::to_string(size);
    return (out.empty() ? "data 1" : out) + " stage " + std::to_string(stage);
  }
  // What resuming from this layout's checkpoint prints (train/checkpointing.cpp).
  std::string saved_by() const {
    return "saved by " + std::to_string(ranks()) + " rank(s) at ZeRO stage " +
           std::to_string(stage) + ", data " + std::to_string(data) + " x pipeline " +
           std::to_string(pipeline) + " x tensor " + std::to_string(tensor);
  }
};

struct Reshard {
  Layout saved, resumed;
};

class CheckpointResumeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    data_ = new std::string(make_token_file(*dir_));
  }
  static void TearDownTestSuite() {
    delete data_;
    delete dir_;
  }

  struct Run {
    int status = -1;
    std::string output;
    std::vector<nlohmann::json> metrics;
    std::vector<double> losses() const {
      std::vector<double> out;
      for (const auto& m : metrics) out.push_back(m.at("loss").get<double>());
      return out;
    }
  };

  // The losses of runs that continue one another, in order (one chain of resumes).
  static RunLosses chained(std::initializer_list<const Run*> runs) {
    RunLosses out;
    for (const Run* r : runs)
      for (double l : r->losses()) out.losses.push_back(l);
    return out;
  }

  // Trains `steps` steps of the tiny GPT (run_helpers' config + `extra`) in run dir `name`.
  static Run train(const std::string& name, int ranks, int64_t micro, int64_t gas, int64_t steps,
                   const std::string& extra, const std::map<std::string, std::string>& env = {}) {
    const std::string run_dir = dir_->file("run_" + name);
    const std::string config = dir_->file(name + ".json");
    write_file(config, tiny_run_config(*data_, run_dir, micro, gas, steps, extra));
    // With faults to inject, the ranks are the test build of deepshard that injects them.
    auto r = run_ranks(ranks, env.empty() ? deepshard_exe() : faults_exe(),
                       {"train", "--config", config}, 300, env);
    Run out;
    out.status = r.exit_status;
    out.output = r.output;
    if (fs::exists(run_dir + "/metrics.jsonl")) out.metrics = read_metrics(run_dir);
    return out;
  }

  static std::string ckpt(const std::string& name) { return dir_->file("ckpt_" + name); }

  // {"train": {...}, "zero_optimization": {"stage": S}} merged with `more`.
  static std::string extra(int stage, const std::string& checkpoint_dir, int64_t save_interval,
                           const std::string& resume, const std::string& more = "{}") {
    nlohmann::json j = {{"zero_optimization", {{"stage", stage}}},
                        {"train",
                         {{"checkpoint_dir", checkpoint_dir},
                          {"save_interval", save_interval},
                          {"resume", resume}}}};
    j.merge_patch(nlohmann::json::parse(more));
    return j.dump();
  }

  // The losses of the uninterrupted single-rank run at stage 0, global batch 8 (4 x 2), 20 steps.
  static RunLosses reference_losses(const std::string& name, const std::string& more = "{}") {
    const Run reference = train(name, 1, 4, 2, 20, extra(0, "", 0, "", more));
    EXPECT_EQ(reference.status, 0) << reference.output;
    RunLosses out;
    out.losses = reference.losses();
    out.output = reference.output;
    return out;
  }

  // Train 20 uninterrupted; train 10 and save; resume in new processes and train 10 more
  // (`ranks` ranks, micro-batch 2, accumulation 2).
  static void expect_exact_resume(const std::string& name, int stage, const std::string& more,
                                  int ranks = 2) {
    const Run full = train(name + "_full", ranks, 2, 2, 20, extra(stage, "", 0, "", more));
    ASSERT_EQ(full.status, 0) << full.output;
    const Run first = train(name + "_a", ranks, 2, 2, 10, extra(stage, ckpt(name), 10, "", more));
    ASSERT_EQ(first.status, 0) << first.output;
    EXPECT_TRUE(fs::exists(ckpt(name) + "/step10/manifest.json"));
    const Run second =
        train(name + "_b", ranks, 2, 2, 20, extra(stage, ckpt(name), 0, "auto", more));
    ASSERT_EQ(second.status, 0) << second.output;
    ASSERT_EQ(full.metrics.size(), 20u);
    ASSERT_EQ(second.metrics.size(), 10u) << second.output;
    for (size_t i = 0; i < 10; ++i) {
      const auto& want = full.metrics[10 + i];
      const auto& got = second.metrics[i];
      EXPECT_EQ(got.at("step"), want.at("step"));
      EXPECT_EQ(got.at("loss").get<double>(), want.at("loss").get<double>())
          << name << ", step " << 11 + i;
      EXPECT_EQ(got.at("loss_scale").get<double>(), want.at("loss_scale").get<double>())
          << name << ", step " << 11 + i;
      EXPECT_EQ(got.at("lr").get<double>(), want.at("lr").get<double>()) << name;
    }
    std::printf("%s: steps 11-20 after resume equal the uninterrupted run bit for bit\n",
                name.c_str());
  }

  // `deepshard convert` of exact-resume run `name`'s step-10 checkpoint is byte for byte the
  // model.safetensors its first run (train.save_weights) wrote at the same step.
  static void expect_converted_equals_saved_weights(const std::string& name) {
    const std::string out = dir_->file(name + ".safetensors");
    const auto converted = run_deepshard({"convert", ckpt(name), "--to", "safetensors", out}, 60);
    ASSERT_EQ(converted.exit_status, 0) << converted.output;
    const std::string saved = dir_->file("run_" + name + "_a") + "/model.safetensors";
    ASSERT_TRUE(fs::exists(saved));
    EXPECT_EQ(read_file(out), read_file(saved)) << name;
    std::printf("%s: convert of the checkpoint = save_weights at step 10, %zu bytes\n",
                name.c_str(), static_cast<size_t>(fs::file_size(saved)));
  }

  // Each row: train steps 1-10 at `saved` and checkpoint (one run per distinct saved layout), then
  // steps 11-20 at `resumed` from that checkpoint in new processes; the 20 losses must match the
  // uninterrupted single-rank run within 1e-4 and the resume names the saving layout. `model`
  // wraps a run config's extra sections (the model; identity: the tiny GPT).
  static void expect_reshards(const std::string& name, const std::vector<Reshard>& rows,
                              std::string (*model)(const std::string&)) {
    const RunLosses ref = reference_losses(name + "_ref", model("{}"));
    ASSERT_EQ(ref.losses.size(), 20u) << ref.output;
    std::map<std::string, std::pair<Run, std::string>> saves;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Layout& s = rows[i].saved;
      const Layout& r = rows[i].resumed;
      auto save = saves.find(s.text());
      if (save == saves.end()) {
        const std::string id = name + "_save" + std::to_string(saves.size());
        const std::string c = ckpt(id);
        const auto run = train(id, s.ranks(), s.micro(), s.accumulation(), 10,
                               model(extra(s.stage, c, 10, "", s.sections())));
        ASSERT_EQ(run.status, 0) << run.output;
        save = saves.emplace(s.text(), std::pair{run, c}).first;
      }
      const auto& [first, c] = save->second;
      const auto second =
          train(name + "_resume" + std::to_string(i), r.ranks(), r.micro(), r.accumulation(), 20,
                model(extra(r.stage, c, 0, c + "/step10", r.sections())));
      ASSERT_EQ(second.status, 0) << second.output;
      EXPECT_NE(second.output.find(s.saved_by()), std::string::npos) << second.output;
      expect_same_losses(chained({&first, &second}), ref,
                         name + ": " + s.text() + " -> " + r.text());
    }
  }

  static TempDir* dir_;
  static std::string* data_;
};

TempDir* CheckpointResumeTest::dir_ = nullptr;
std::string* CheckpointResumeTest::data_ = nullptr;

TEST_F(CheckpointResumeTest, Stage0ResumesExactly) { expect_exact_resume("s0", 0, "{}"); }
TEST_F(CheckpointResumeTest, Stage1ResumesExactly) { expect_exact_resume("s1", 1, "{}"); }
TEST_F(CheckpointResumeTest, Stage2ResumesExactly) { expect_exact_resume("s2", 2, "{}"); }
TEST_F(CheckpointResumeTest, Stage3ResumesExactly) { expect_exact_resume("s3", 3, "{}"); }

// PowerSGD's error feedback and warm-started Q are per-rank state: resuming mid-compression (it
// starts at step 4, the save is at step 10) must continue exactly.
TEST_F(CheckpointResumeTest, PowerSgdResumesMidCompressionExactly) {
  const std::string compression =
      R"({"compression": {"type": "powerSGD",
          "params": {"matrix_approximation_rank": 2, "start_compressing_after_step": 4}}})";
  expect_exact_resume("powersgd_s0", 0, compression);
  expect_exact_resume("powersgd_s1", 1, compression);
}

TEST_F(CheckpointResumeTest, Bf16Stage2ResumesExactly) {
  expect_exact_resume("bf16_s2", 2, R"({"bf16": {"enabled": true}})");
}

TEST_F(CheckpointResumeTest, Bf16Stage3ResumesExactly) {
  expect_exact_resume("bf16_s3", 3, R"({"bf16": {"enabled": true}})");
}

TEST_F(CheckpointResumeTest, Fp16ScalerStateIsRestored) {
  // The dynamic scale doubles every 3 clean steps from 2^8: after the resume it must continue
  // from the saved state (loss_scale is compared step by step).
  expect_exact_resume("fp16_s1", 1,
                      R"({"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 8,
                   "loss_scale_window": 3, "hysteresis": 1}})");
}

// Saved at one world size and stage, loaded at others: matches the uninterrupted run.
TEST_F(CheckpointResumeTest, ReshardsAcrossWorldSizesAndStages) {
  // Global batch 12 = micro x accumulation x N for N = 1, 2, 3, 4.
  const Run reference = train("reshard_ref", 1, 4, 3, 20, extra(0, "", 0, ""));
  ASSERT_EQ(reference.status, 0) << reference.output;
  const std::string c = ckpt("reshard");
  // N = 4 stage 3 (steps 1-7) -> N = 2 stage 1 (8-14) -> N = 3 stage 2 (15-20).
  const Run a = train("reshard_a", 4, 1, 3, 7, extra(3, c, 7, ""));
  ASSERT_EQ(a.status, 0) << a.output;
  const Run b = train("reshard_b", 2, 2, 3, 14, extra(1, c, 7, "auto"));
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(b.output.find("saved by 4 rank(s) at ZeRO stage 3"), std::string::npos) << b.output;
  const Run d = train("reshard_c", 3, 2, 2, 20, extra(2, c, 0, "auto"));
  ASSERT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("saved by 2 rank(s) at ZeRO stage 1"), std::string::npos) << d.output;
  RunLosses ref;
  ref.losses = reference.losses();
  expect_same_losses(chained({&a, &b, &d}), ref, "N=4 stage 3 -> N=2 stage 1 -> N=3 stage 2");

  // N = 2 stage 2 (1-10) -> N = 3 stage 3 (11-20), then N = 3 stage 0 from the N=4 stage 3 save.
  const std::string c2 = ckpt("reshard2");
  const Run e = train("reshard_d", 2, 2, 3, 10, extra(2, c2, 10, ""));
  ASSERT_EQ(e.status, 0) << e.output;
  const Run f = train("reshard_e", 3, 2, 2, 20, extra(3, c2, 0, "auto"));
  ASSERT_EQ(f.status, 0) << f.output;
  expect_same_losses(chained({&e, &f}), ref, "N=2 stage 2 -> N=3 stage 3");
  const Run g = train("reshard_f", 3, 2, 2, 20, extra(0, c, 0, c + "/step7"));
  ASSERT_EQ(g.status, 0) << g.output;
  expect_same_losses(chained({&a, &g}), ref, "N=4 stage 3 -> N=3 stage 0");
}

// The Llama model resharded: N = 2 stage 3 (steps 1-10, built under zero.Init) -> N = 3 stage 1
// (11-20) matches the uninterrupted single-rank run.
TEST_F(CheckpointResumeTest, LlamaReshardsAcrossWorldSizesAndStages) {
  auto llama = [](int stage, const std::string& c, int64_t save, const std::string& resume) {
    return tiny_llama_section("{}", extra(stage, c, save, resume));
  };
  const Run reference = train("llama_ref", 1, 4, 3, 20, llama(0, "", 0, ""));
  ASSERT_EQ(reference.status, 0) << reference.output;
  const std::string c = ckpt("llama");
  const Run a = train("llama_a", 2, 2, 3, 10, llama(3, c, 10, ""));
  ASSERT_EQ(a.status, 0) << a.output;
  const Run b = train("llama_b", 3, 2, 2, 20, llama(1, c, 0, "auto"));
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(b.output.find("saved by 2 rank(s) at ZeRO stage 3"), std::string::npos) << b.output;
  RunLosses ref;
  ref.losses = reference.losses();
  expect_same_losses(chained({&a, &b}), ref, "llama: N=2 stage 3 -> N=3 stage 1");
}

// {"<section>": {"enabled": true, "<size_key>": 2}} merged with `more`.
std::string two_way(const char* section, const char* size_key, const std::string& more) {
  nlohmann::json j = {{section, {{"enabled", true}, {size_key, 2}}}};
  j.merge_patch(nlohmann::json::parse(more));
  return j.dump();
}
// Tensor parallelism of size 2.
std::string tensor2(const std::string& more = "{}") {
  return two_way("tensor_parallel", "size", more);
}

// Tensor 2 x data 2 (4 ranks, ZeRO stage 1) resumes at the same layout bit for bit; its manifest
// has the whole model's table (whole shapes, the split of each parameter) and the layout, and its
// consolidated weights (`deepshard convert`) are byte for byte what train.save_weights gathered.
TEST_F(CheckpointResumeTest, TensorParallelResumesExactly) {
  expect_exact_resume("tp2_dp2_s1", 1, tensor2(R"({"train": {"save_weights": true}})"), 4);
  const auto manifest =
      nlohmann::json::parse(read_file(ckpt("tp2_dp2_s1") + "/step10/manifest.json"));
  EXPECT_EQ(manifest.at("world_size"), 4);
  EXPECT_EQ(manifest.at("layout"), (nlohmann::json{{"data", 2}, {"pipeline", 1}, {"tensor", 2}}));
  std::map<std::string, nlohmann::json> params;
  for (const auto& p : manifest.at("parameters")) params[p.at("name")] = p;
  EXPECT_EQ(params.at("h.0.attn.c_attn.weight").at("shape"), (nlohmann::json{192, 64}));
  EXPECT_EQ(params.at("h.0.attn.c_attn.weight").at("tensor_split"),
            (nlohmann::json{{"dim", 0}, {"blocks", 3}}));
  EXPECT_EQ(params.at("h.1.mlp.c_proj.weight").at("shape"), (nlohmann::json{64, 256}));
  EXPECT_EQ(params.at("h.1.mlp.c_proj.weight").at("tensor_split"),
            (nlohmann::json{{"dim", 1}, {"blocks", 1}}));
  EXPECT_EQ(params.at("wte.weight").at("tensor_split").at("dim"), 0);
  EXPECT_FALSE(params.at("ln_f.weight").contains("tensor_split"));
  expect_converted_equals_saved_weights("tp2_dp2_s1");
}

// A tensor-parallel checkpoint of another model shape, or with a rank's file missing, fails on
// every rank naming the file.
TEST_F(CheckpointResumeTest, TensorParallelCheckpointErrorsNameTheFile) {
  const std::string c = ckpt("tperr");
  const Run a = train("tperr_a", 4, 2, 2, 3, extra(1, c, 3, "", tensor2()));
  ASSERT_EQ(a.status, 0) << a.output;
  auto resume_error = [&](const std::string& name, const std::string& more) {
    const Run r = train(name, 2, 4, 2, 5, extra(0, c, 0, "step3", tensor2(more)));
    EXPECT_NE(r.status, 0) << r.output;
    return r.output;
  };
  const std::string model = resume_error("tperr_model", R"({"model": {"n_embd": 32}})");
  EXPECT_NE(model.find(c + "/step3/manifest.json: checkpoint of a different model: parameter '"),
            std::string::npos)
      << model;
  EXPECT_NE(model.find("in the checkpoint but"), std::string::npos) << model;
  fs::remove(c + "/step3/rank_00003");
  const std::string missing = resume_error("tperr_missing", "{}");
  EXPECT_NE(
      missing.find(c + "/step3/rank_00003: missing shard file (the checkpoint was saved by 4"),
      std::string::npos)
      << missing;
}

// {"pipeline": {"stages": 2}} (the tiny GPT's 2 blocks: the embedding and block 0 on stage 0,
// block 1 and the head on stage 1) merged with `more`.
std::string pipeline2(const std::string& more = "{}") {
  return two_way("pipeline", "stages", more);
}

// A pipeline of 2 stages resumes itself bit for bit (each stage writes its own parameters under
// the whole model's names, the tied wte once, by the first stage).
TEST_F(CheckpointResumeTest, PipelineResumesExactly) {
  expect_exact_resume("pp2_s1", 1, pipeline2(R"({"train": {"save_weights": true}})"), 2);
  expect_converted_equals_saved_weights("pp2_s1");
  const auto manifest = nlohmann::json::parse(read_file(ckpt("pp2_s1") + "/step10/manifest.json"));
  EXPECT_EQ(manifest.at("layout"), (nlohmann::json{{"data", 1}, {"pipeline", 2}, {"tensor", 1}}));
  EXPECT_EQ(manifest.at("module_state"), "");
}

std::string gpt(const std::string& extra) { return extra; }
std::string llama(const std::string& extra) { return tiny_llama_section("{}", extra); }

// Tensor-parallel checkpoints (records are ranges of the whole parameters) reshard to data
// parallelism, to another tensor layout, and back.
TEST_F(CheckpointResumeTest, TensorParallelReshards) {
  expect_reshards("tpr",
                  {{{.data = 2, .tensor = 2, .stage = 1}, {.data = 4, .stage = 3}},
                   {{.data = 2, .tensor = 2, .stage = 1}, {.tensor = 2, .stage = 0}},
                   {{.data = 4, .stage = 1}, {.data = 2, .tensor = 2, .stage = 2}}},
                  gpt);
}

// The tensor-parallel Llama (q/k/v, gate/up, o/down, the embedding and the untied head split by
// the Llama's tensor-parallel plan).
TEST_F(CheckpointResumeTest, TensorParallelLlamaReshards) {
  expect_reshards("tpl", {{{.data = 2, .tensor = 2, .stage = 1}, {.data = 2, .stage = 3}}}, llama);
}

// Pipeline stages of the Llama (the untied head on the last stage, no tied copy): a pipeline, and
// a pipeline of tensor-parallel stages, reshard to data parallelism and back.
TEST_F(CheckpointResumeTest, PipelineLlamaReshards) {
  expect_reshards("ppl",
                  {{{.pipeline = 2, .stage = 1}, {.data = 2, .stage = 3}},
                   {{.pipeline = 2, .tensor = 2, .stage = 1}, {.data = 4, .stage = 1}},
                   {{.data = 2, .stage = 1}, {.pipeline = 2, .stage = 0}}},
                  llama);
}

// Pipeline checkpoints reshard to data parallelism, to pipeline x data, and back.
TEST_F(CheckpointResumeTest, PipelineReshards) {
  expect_reshards("ppr",
                  {{{.pipeline = 2, .stage = 0}, {.data = 2, .stage = 1}},
                   {{.pipeline = 2, .stage = 0}, {.data = 2, .pipeline = 2, .stage = 1}},
                   {{.data = 2, .stage = 1}, {.pipeline = 2, .stage = 1}}},
                  gpt);
}

// ZeRO stages 2 and 3 inside pipeline stages (each stage sharded over its data-parallel group)
// reshard to and from data-parallel stage 3.
TEST_F(CheckpointResumeTest, ZeroInsidePipelineReshards) {
  expect_reshards("zpr",
                  {{{.data = 2, .pipeline = 2, .stage = 3}, {.data = 4, .stage = 3}},
                   {{.data = 4, .stage = 3}, {.data = 2, .pipeline = 2, .stage = 2}}},
                  gpt);
}

// Tensor 2 x pipeline 2 (4 ranks, ZeRO stage 1: each stage's tensor ranks write their slices of
// the stage's parameters, the replicated ones by tensor rank 0, the tied wte by the first stage)
// resumes itself bit for bit; the manifest has the whole model's table and the layout.
TEST_F(CheckpointResumeTest, TensorPipelineResumesExactly) {
  expect_exact_resume("tp2_pp2_s1", 1, tensor2(pipeline2(R"({"train": {"save_weights": true}})")),
                      4);
  expect_converted_equals_saved_weights("tp2_pp2_s1");
  const auto manifest =
      nlohmann::json::parse(read_file(ckpt("tp2_pp2_s1") + "/step10/manifest.json"));
  EXPECT_EQ(manifest.at("layout"), (nlohmann::json{{"data", 1}, {"pipeline", 2}, {"tensor", 2}}));
  EXPECT_EQ(manifest.at("shards").size(), 4u);
  EXPECT_EQ(manifest.at("module_state"), "");
  std::map<std::string, nlohmann::json> params;
  for (const auto& p : manifest.at("parameters")) params[p.at("name")] = p;
  EXPECT_EQ(params.size(), 28u);  // every parameter of both stages: 2 blocks x 12 + 4
  EXPECT_EQ(params.at("h.1.attn.c_attn.weight").at("shape"), (nlohmann::json{192, 64}));
  EXPECT_EQ(params.at("wte.weight").at("tensor_split").at("dim"), 0);
}

// A pipeline of tensor-parallel stages reshards to data parallelism (the issue's "TP 2 x PP 2
// resumes at DP 4, and the reverse"), to pipeline x data, and back.
TEST_F(CheckpointResumeTest, TensorPipelineReshards) {
  expect_reshards(
      "tppr",
      {{{.pipeline = 2, .tensor = 2, .stage = 1}, {.data = 4, .stage = 3}},
       {{.pipeline = 2, .tensor = 2, .stage = 1}, {.data = 2, .pipeline = 2, .stage = 1}},
       {{.data = 4, .stage = 1}, {.pipeline = 2, .tensor = 2, .stage = 1}}},
      gpt);
}

// kill -9 of a rank while it saves: the run fails, the previous `latest` stays and resumes exactly.
TEST_F(CheckpointResumeTest, RankKilledDuringSaveLeavesPreviousLatest) {
  const std::string c = ckpt("killed");
  const Run full = train("killed_full", 2, 2, 2, 10, extra(1, "", 0, ""));
  ASSERT_EQ(full.status, 0) << full.output;
  const Run a = train("killed_a", 2, 2, 2, 10, extra(1, c, 5, "", R"({"comm": {"timeout_s": 10}})"),
                      {{"DEEPSHARD_TEST_SAVE_KILL", "1:step10"}});
  EXPECT_NE(a.status, 0) << a.output;
  EXPECT_EQ(read_file(c + "/latest"), "step5");
  EXPECT_FALSE(fs::exists(c + "/step10"));
  const Run b = train("killed_b", 2, 2, 2, 10, extra(1, c, 0, "auto"));
  ASSERT_EQ(b.status, 0) << b.output;
  ASSERT_EQ(b.metrics.size(), 5u) << b.output;
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(b.metrics[i].at("loss").get<double>(), full.metrics[5 + i].at("loss").get<double>());
}

// SIGTERM (Slurm's preemption) mid-run: the step finishes, a checkpoint is saved, every rank and
// the launcher exit 0, and the run resumes exactly from it.
TEST_F(CheckpointResumeTest, SigtermSavesAndResumesExactly) {
  const std::string c = ckpt("sigterm");
  const Run full = train("sigterm_full", 2, 2, 2, 20, extra(2, "", 0, ""));
  ASSERT_EQ(full.status, 0) << full.output;
  const std::string run_dir = dir_->file("run_sigterm_a");
  const std::string config = dir_->file("sigterm_a.json");
  write_file(config, tiny_run_config(*data_, run_dir, 2, 2, 20,
                                     extra(2, c, 1000, "", R"({"train": {"log_interval": 1}})")));
  launch::SubprocessOptions o;
  o.argv = {deepshard_exe(), "launch", "-n", "2", "--", faults_exe(), "train", "--config", config};
  o.extra_env = {{"DEEPSHARD_TEST_SAVE_DELAY_MS", "0"}};
  launch::Subprocess launcher(o);
  std::string out;
  char buf[4096];
  const auto start = std::chrono::steady_clock::now();
  while (out.find("step 5/20") == std::string::npos &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
    const ssize_t n = ::read(launcher.output_fd(), buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ASSERT_NE(out.find("step 5/20"), std::string::npos) << out;
  launcher.signal(SIGTERM);
  for (ssize_t n; (n = ::read(launcher.output_fd(), buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  const auto status = launcher.wait(60);
  ASSERT_TRUE(status.has_value()) << out;
  EXPECT_EQ(*status, 0) << out;
  EXPECT_NE(out.find("stop requested"), std::string::npos) << out;
  const std::string tag = read_file(c + "/latest");
  const int64_t saved = std::stoll(tag.substr(4));
  EXPECT_GE(saved, 5) << out;
  EXPECT_LT(saved, 20) << out;
  const Run b = train("sigterm_b", 2, 2, 2, 20, extra(2, c, 0, "auto"));
  ASSERT_EQ(b.status, 0) << b.output;
  ASSERT_EQ(b.metrics.size(), static_cast<size_t>(20 - saved)) << b.output;
  for (size_t i = 0; i < b.metrics.size(); ++i)
    EXPECT_EQ(b.metrics[i].at("loss").get<double>(),
              full.metrics[saved + i].at("loss").get<double>());
}

// Damaged or foreign checkpoints: the load fails on every rank with the file and the problem.
TEST_F(CheckpointResumeTest, DamagedOrForeignCheckpointsAreReported) {
  const std::string c = ckpt("damaged");
  const Run a = train("damaged_a", 2, 2, 2, 3, extra(1, c, 3, ""));
  ASSERT_EQ(a.status, 0) << a.output;
  const std::string tag = c + "/step3";
  auto copy_of = [&](const std::string& name) {
    const std::string to = dir_->file("ckpt_" + name);
    fs::copy(c, to, fs::copy_options::recursive);
    return to;
  };
  auto resume_error = [&](const std::string& dir, const std::string& name,
                          const std::string& more = "{}") {
    const Run r = train(name, 1, 4, 2, 5, extra(0, dir, 0, "step3", more));
    EXPECT_NE(r.status, 0) << r.output;
    return r.output;
  };
  auto expect_in = [](const std::string& output, const std::string& text) {
    EXPECT_NE(output.find(text), std::string::npos) << "expected '" << text << "' in\n" << output;
  };
  {  // truncated shard
    const std::string d = copy_of("truncated");
    const std::string shard = d + "/step3/rank_00001";
    fs::resize_file(shard, fs::file_size(shard) - 100);
    const std::string out = resume_error(d, "err_truncated");
    expect_in(out, shard + ": truncated file");
  }
  {  // one flipped byte in the middle of rank 0's data
    const std::string d = copy_of("flipped");
    const std::string shard = d + "/step3/rank_00000";
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto pos = static_cast<std::streamoff>(fs::file_size(shard) / 2);
    f.seekg(pos);
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 0x04;
    f.seekp(pos);
    f.write(&byte, 1);
    f.close();
    const std::string out = resume_error(d, "err_flipped");
    expect_in(out, shard + ": corrupt file: tensor '");
    expect_in(out, "CRC32 mismatch");
  }
  {  // missing rank file
    const std::string d = copy_of("missing");
    fs::remove(d + "/step3/rank_00001");
    const std::string out = resume_error(d, "err_missing");
    expect_in(out, d + "/step3/rank_00001: missing shard file");
  }
  {  // another model
    const std::string out = resume_error(c, "err_model", R"({"model": {"n_embd": 32}})");
    expect_in(out, tag + "/manifest.json: checkpoint of a different model: parameter '");
    expect_in(out, "in the checkpoint but");
  }
  {  // a tag that does not exist
    const std::string out = resume_error(dir_->file("nowhere"), "err_none");
    expect_in(out, "does not exist");
  }
}

}  // namespace checkpoint_resume_test
}  // namespace deepshard::testing
