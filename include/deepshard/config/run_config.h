// A deepshard run file: DeepSpeed's keys (parsed into DsConfig) plus deepshard's own sections
// `model`, `data`, `task`, `train` and `comm`. The `train` section also carries the values that
// fill DeepSpeed "auto" entries, as Hugging Face's Trainer does from its arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deepshard/config/ds_config.h"
#include "deepshard/config/parallel_config.h"

namespace deepshard::config {

// model: an architecture (its name in the models layer's registry; "" = the first registered), a
// preset of it or explicit sizes; explicit sizes override the preset. Keys another
// architecture's model has are errors (docs/models.md lists each architecture's keys). The
// sizes and options are the union of the architectures' keys; which apply is the
// architecture's to say (its schema's check, ArchSchema).
struct ModelConfig {
  std::string arch;
  std::string preset = "tiny";
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_embd = 0;
  int64_t block_size = 0;
  int64_t n_kv_head = 0;                    // key/value heads (grouped-query attention); 0: preset
  int64_t intermediate_size = 0;            // the MLP's width; 0: preset
  std::optional<double> rope_theta;         // rotary embeddings' base
  std::optional<double> rms_norm_eps;       // RMSNorm's epsilon
  std::optional<bool> tie_word_embeddings;  // the head tied to the embeddings
  int64_t vocab_size = 256;                 // byte-level tokenizer
  double dropout = 0.0;
  std::optional<bool> bias;   // Linear biases
  bool fused_kernels = true;  // fused CPU kernels (GELU, causal softmax, loss); false: libtorch ops
  std::string init_from;      // safetensors weights to start from ("" = fresh init)
  // The classification head's pooling (bert): "first" (HF's BertPooler: the first position's
  // hidden state) or "mean" (the mean over the positions); unset: "first".
  std::optional<std::string> pooling;
  // Classes of the classification head (0: none). Not a run-file key: a classification task sets
  // it from its label file's classes.
  int64_t num_labels = 0;
};

// A named set of sizes of one architecture (model.preset).
struct ModelPreset {
  std::string name;
  int64_t n_layer = 0, n_head = 0, n_embd = 0, block_size = 0;
  int64_t n_kv_head = 0, intermediate_size = 0;  // 0 for an architecture without them
};

// What the model section needs to know of one architecture: its name, its presets and its own
// checks of the section. The models layer supplies one per registered architecture
// (models::arch_schemas(), src/models/registry.h); config knows none.
struct ArchSchema {
  std::string name;
  std::vector<ModelPreset> presets;
  // Appends the problems of `model` (preset applied) as (key path, message).
  std::function<void(const ModelConfig& model,
                     std::vector<std::pair<std::string, std::string>>& problems)>
      check;
};
using ArchSchemas = std::vector<ArchSchema>;

// data: token files written by `deepshard prepare-data`.
struct DataConfig {
  std::string train;
  std::string valid;  // "" = no validation
};

// task: what the model is trained for. "pretraining": the model's own objective on windows of
// the token files (the next token; bert: masked-LM). "classification": the model's pooled
// classifier on windows of the passages of label files (prepare-data --labels), the loss the
// cross-entropy of the classes; its validation reports accuracy beside the loss.
struct TaskConfig {
  std::string type = "pretraining";
  std::string train_labels;  // "" = data.train without ".bin", plus ".labels"
  std::string valid_labels;  // "" = the same of data.valid
  bool classification() const { return type == "classification"; }
};

// train: the run itself, plus the HF-Trainer-style values that resolve DeepSpeed "auto".
struct TrainConfig {
  int64_t steps = 100;  // optimizer steps
  uint64_t seed = 1234;
  std::string run_dir = "runs/default";
  int64_t log_interval = 10;  // progress line every N steps (also metrics.jsonl has every step)
  int64_t eval_interval = 0;  // validation loss every N steps (0 = only at the end if valid set)
  int64_t eval_batches = 4;   // micro-batches per rank per validation
  int64_t sample_tokens = 0;  // tokens of text sampled by rank 0 at the end (0 = none)
  std::string sample_prompt = "The ";
  double sample_temperature = 0.8;
  int64_t sample_top_k = 40;
  bool memory_report = false;  // rank 0 prints the memory ledger beside the estimate at start
  // Recompute the model's checkpointable regions (its layers) in backward, as DeepSpeed's
  // activation_checkpointing section configures (HF Trainer's gradient_checkpointing).
  bool activation_checkpointing = false;
  // At the end, rank 0 writes <run_dir>/model.safetensors (its architecture's Hugging Face names);
  // at ZeRO stage 3 this needs zero_optimization.stage3_gather_16bit_weights_on_model_save.
  bool save_weights = false;
  // Checkpoints (docs/checkpoint.md): every save_interval steps (0 = never; a run that saves
  // periodically also saves at its end and when it gets SIGTERM) into checkpoint_dir ("" =
  // <run_dir>/checkpoints), tags "step<N>". resume: "" = start fresh, "auto" = continue from
  // checkpoint_dir's latest if there is one, else a tag in checkpoint_dir or a tag directory path.
  int64_t save_interval = 0;
  std::string checkpoint_dir;
  std::string resume;
  // Values that fill DeepSpeed "auto" (absent: "auto" must be derivable or it is an error).
  std::optional<int64_t> micro_batch_size;             // train_micro_batch_size_per_gpu
  std::optional<int64_t> gradient_accumulation_steps;  // gradient_accumulation_steps
  std::optional<double> lr;                            // optimizer.params.lr, warmup_max_lr
  std::optional<double> weight_decay;                  // optimizer.params.weight_decay
  std::optional<int64_t> warmup_steps;                 // scheduler.params.warmup_num_steps
  std::optional<double> max_grad_norm;                 // gradient_clipping
  std::optional<std::string> precision;                // "fp32" | "bf16" | "fp16"
};

// comm: deepshard's own communication settings.
struct CommConfig {
  // Every collective; DeepSpeed's 30 minutes is far too long to notice a dead rank.
  double timeout_s = 300.0;
  // "auto" (shared memory when every rank is on one host, else Gloo), "gloo" or "shm".
  std::string transport = "auto";
};

struct RunConfig {
  DsConfig ds;
  ModelConfig model;
  DataConfig data;
  TaskConfig task;
  TrainConfig train;
  CommConfig comm;
  // The rank grid's sections, pipeline and tensor_parallel (docs/parallel.md).
  ParallelConfig parallel;
  // The fully resolved config (DeepSpeed keys + deepshard's), pretty JSON.
  std::string resolved_json;
};

}  // namespace deepshard::config
