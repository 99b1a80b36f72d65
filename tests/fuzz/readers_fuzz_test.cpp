// Hostile inputs: seeded mutation fuzzing of every reader of untrusted files — the JSON run/config
// reader, the checkpoint manifest and shard reader, the safetensors reader and the token-file
// reader. Each mutated file must either load or fail with a deepshard error naming the file; a
// crash, a hang or another exception type fails the test (out-of-bounds reads are caught by the
// same cases under AddressSanitizer: scripts/sanitize.sh). 2000 cases per reader here (seconds);
// scripts/fuzz.sh runs many more (DEEPSHARD_FUZZ_CASES, DEEPSHARD_FUZZ_SEED).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/token_file.h"
#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "fuzz/mutator.h"
#include "models/registry.h"
#include "support/test_support.h"

namespace deepshard::fuzz {
namespace readers_fuzz_test {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), std::streamsize(content.size()));
}

struct Tally {
  int loaded = 0, refused = 0;
};

// Runs `cases` mutations of `valid` written to `path`, each read by `read`; `name_in_error`: what
// every error must contain (the file's path).
Tally fuzz(const std::string& what, const std::string& path, const std::string& valid,
           const std::function<void()>& read, const std::string& name_in_error, int cases,
           uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tally tally;
  for (int i = 0; i < cases; ++i) {
    const std::string input = mutate(valid, rng);
    spit(path, input);
    try {
      read();
      ++tally.loaded;
    } catch (const Error& e) {
      ++tally.refused;
      const std::string m = e.what();
      if (m.find(name_in_error) == std::string::npos) {
        ADD_FAILURE() << what << " case " << i << " (seed " << seed << "): the error does not name "
                      << name_in_error << ": " << m;
        return tally;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " case " << i << " (seed " << seed
                    << "): not a deepshard error: " << e.what();
      return tally;
    }
  }
  std::printf(
      "%s: %d cases (seed %llu): %d loaded, %d refused with an error naming the file, "
      "0 crashes\n",
      what.c_str(), cases, static_cast<unsigned long long>(seed), tally.loaded, tally.refused);
  return tally;
}

const char* kRunFile = R"({
  "train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4,
  "gradient_clipping": 1.0, "steps_per_print": 10,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8,
                "weight_decay": 0.1}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10,
                "total_num_steps": 100, "warmup_max_lr": 3e-4}},
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 5e5,
                        "stage3_prefetch_bucket_size": "auto",
                        "stage3_param_persistence_threshold": 1e4},
  "checkpoint": {"tag_validation": "Warn"},
  "model": {"preset": "tiny"},
  "data": {"train": "data/x.bin"},
  "train": {"steps": 20, "seed": 3, "save_interval": 10, "resume": "auto"},
  "comm": {"timeout_s": 60}
})";

TEST(FuzzReaders, JsonRunFile) {
  testing::TempDir dir;
  const std::string path = dir.file("run.json");
  auto read = [&] {
    std::vector<std::string> warnings;
    config::parse_run_config(config::read_json_file(path), 1, &warnings, path,
                             models::arch_schemas());
  };
  spit(path, kRunFile);
  read();  // the valid file loads
  auto t = fuzz("json run file", path, kRunFile, read, path, fuzz_cases(2000), fuzz_seed());
  EXPECT_GT(t.refused, 0);
}

TEST(FuzzReaders, CheckpointManifestAndShard) {
  testing::TempDir dir;
  const std::string tag = dir.file("step7");
  using namespace checkpoint;
  const nlohmann::json manifest = {{"format_version", kCheckpointFormatVersion},
                                   {"world_size", 1},
                                   {"zero_stage", 1},
                                   {"parameters",
                                    {{{"name", "w"}, {"shape", {2, 5}}, {"dtype", "float32"}},
                                     {{"name", "b"}, {"shape", {3}}, {"dtype", "bfloat16"}}}},
                                   {"client_state", {{"step", 7}}}};
  std::vector<StateRecord> records;
  for (StateKind kind : kStateKinds) {
    records.push_back({"w", 0, 10, kind, torch::arange(0, 10, torch::kFloat)});
    records.push_back({"b", 0, 3, kind, torch::arange(0, 3, torch::kFloat)});
  }
  std::filesystem::create_directories(tag);
  write_manifest(tag, manifest);
  write_rank_shard(tag, 0, 1, records);
  auto read = [&] {
    CheckpointReader reader(tag);
    for (const auto& p : reader.parameters()) {
      for (StateKind kind : kStateKinds) reader.read_range(p.name, kind, 0, p.numel());
    }
    reader.consolidated_weights();
  };
  read();
  const std::string manifest_path = tag + "/" + kManifestName;
  const std::string shard_path = tag + "/" + shard_file_name(0);
  const std::string valid_manifest = slurp(manifest_path), valid_shard = slurp(shard_path);
  const int cases = fuzz_cases(2000);
  auto m =
      fuzz("checkpoint manifest", manifest_path, valid_manifest, read, tag, cases / 2, fuzz_seed());
  spit(manifest_path, valid_manifest);
  auto s = fuzz("checkpoint shard", shard_path, valid_shard, read, tag, cases / 2, fuzz_seed());
  EXPECT_GT(m.refused, 0);
  EXPECT_GT(s.refused, 0);
}

TEST(FuzzReaders, Safetensors) {
  testing::TempDir dir;
  const std::string path = dir.file("w.safetensors");
  checkpoint::save_safetensors(path,
                               {{"a", torch::arange(0, 12, torch::kFloat).reshape({3, 4})},
                                {"b", torch::ones({5}, torch::kBFloat16)},
                                {"c", torch::zeros({2, 2}, torch::kHalf)}},
                               {{"format", "pt"}});
  auto read = [&] { checkpoint::load_safetensors(path); };
  read();
  auto t = fuzz("safetensors", path, slurp(path), read, path, fuzz_cases(2000), fuzz_seed());
  EXPECT_GT(t.refused, 0);
}

TEST(FuzzReaders, TokenFile) {
  testing::TempDir dir;
  const std::string path = dir.file("tokens.bin");
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(uint16_t(i * 7 % 256));
  data::write_token_file(path, tokens, 256);
  auto read = [&] {
    data::TokenFile file(path, 256);
    std::vector<int64_t> out(size_t(file.size()));
    if (file.size() > 0) file.read(0, file.size(), out.data());
  };
  read();
  auto t = fuzz("token file", path, slurp(path), read, path, fuzz_cases(2000), fuzz_seed());
  EXPECT_GT(t.refused, 0);
}

}  // namespace readers_fuzz_test
}  // namespace deepshard::fuzz
