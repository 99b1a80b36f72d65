// `deepshard estimate --params P --ranks N [--stage S] [--offload none|cpu|nvme]
// [--dtype bf16|fp16|fp32] ...`: model-state memory per rank for ZeRO stages 0-3 (design §4), as
// deepshard allocates it, and stage 2's communication buffers. With --model (a preset of --arch and
// sizes, checked as a run file's model section; the architecture's registry entry): the parameter
// count; when the architecture models its activations, also the activation memory of a
// micro-batch with and without activation checkpointing, and with --budget the largest
// micro-batch that fits.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "models/registry.h"
#include "parallel/model_parallel_counts.h"
#include "zero/estimator.h"

namespace deepshard::cli {
namespace {

const char* kEstimateUsage =
    "usage: deepshard estimate --params P --ranks N [--stage S] [--offload none|cpu|nvme]\n"
    "                          [--offload-param none|cpu|nvme] [--dtype bf16|fp16|fp32]\n"
    "                          [--grad-dtype bf16|fp16|fp32] [--reduce-bucket-size E]\n"
    "                          [--overlap-comm] [--no-reduce-scatter] [--accumulation G]\n"
    "                          [--sub-group-size E] [--buffer-count B] [--largest-layer E]\n"
    "                          [--tensor T] [--pipeline S]\n"
    "                          [--partition uniform|parameters|type:REGEX]\n"
    "       deepshard estimate [--arch A] --model PRESET [--n-layer L] [--n-head H] [--n-embd C]\n"
    "                          [--vocab-size V] [--dropout P] [--n-kv-head K]\n"
    "                          [--intermediate-size I] [--tie-word-embeddings] [--seq T]\n"
    "                          [--micro-batch B] [--number-checkpoints K] [--budget BYTES]\n"
    "                          [--ranks N] ...\n"
    "\n"
    "Prints the memory that parameters, gradients, fp32 master weights and Adam state take on\n"
    "each of N data-parallel ranks for a model of P parameters (1.3e9 is accepted), for ZeRO\n"
    "stages 0-3 (the row of --stage is marked), counted as deepshard allocates them (the same\n"
    "figures as `deepshard train --memory-report`). --offload moves optimizer state (and master\n"
    "weights) to host memory or NVMe; --offload-param moves stage-3 parameter shards too.\n"
    "Gradients default to fp32 (deepshard accumulates them in fp32). The comm-buffer column is\n"
    "stage 2's gradient staging (and receive) buffers, sized by --reduce-bucket-size (elements,\n"
    "default 5e8), --overlap-comm (two instead of one) and --accumulation (receive buffers).\n"
    "moved/step: bytes one rank's collectives move per optimizer step (design §4; stage 3 with\n"
    "every unit gathered for its forward and its backward: about 3x the parameter bytes).\n"
    "Each category is split by place: the compute device, host memory (offload cpu) and NVMe\n"
    "files (offload nvme); swap buf is the host memory of NVMe swapping (--sub-group-size and\n"
    "--buffer-count as offload_optimizer's). --largest-layer (elements) adds DeepSpeed's own\n"
    "estimate_zero3_model_states_mem_needs figure for the same model, N ranks on one node.\n"
    "\n"
    "--model (a preset of --arch, default the run file's default model.arch; the size options\n"
    "override it and are checked as the run file's model keys of the same names, so an option\n"
    "another architecture's model does not have is an error; --params then defaults to its\n"
    "parameter count) adds, for an architecture whose activations are modelled\n"
    "(docs/activation.md), the activation memory one rank keeps for backward at the peak of a\n"
    "training pass of\n"
    "--micro-batch sequences (default 1) of --seq tokens (default the block size), in --dtype,\n"
    "without activation checkpointing and with it (every block recomputed, or the first\n"
    "--number-checkpoints). --budget (bytes per rank, 24e9 accepted) prints the largest\n"
    "micro-batch whose model states (at --stage, default 0) and activations fit, with and "
    "without.\n"
    "(--seq, --micro-batch, --number-checkpoints and --budget are refused for the others).\n"
    "\n"
    "--tensor T and --pipeline S (with --model): the N ranks form tensor T x pipeline S x data\n"
    "N/(T S) (docs/parallel.md). Each rank holds its tensor slices (the architecture's\n"
    "tensor-parallel plan: 1/T of every split parameter, the norms and row-parallel biases\n"
    "whole) of its pipeline stage's layers (--partition, DeepSpeed's pipeline.partition: uniform\n"
    "by layer count over [embedding, blocks, head], the default; parameters; or type:REGEX; the\n"
    "first stage holds the embedding, the last the final norm and head and a copy of a tied\n"
    "embedding). Prints each stage's parameters per rank; the table is the\n"
    "heaviest stage's, its ZeRO partitions over the N/(T S) data-parallel ranks (every ZeRO\n"
    "stage shards a pipeline stage over its data-parallel group).\n";

config::DType parse_dtype(const std::string& s, const char* option) {
  if (s == "fp32") return config::DType::kFp32;
  if (s == "bf16") return config::DType::kBf16;
  if (s == "fp16") return config::DType::kFp16;
  throw UsageError(std::string(option) + ": expected fp32, bf16 or fp16, got '" + s + "'");
}

config::OffloadDevice parse_device(const std::string& s, const char* option) {
  if (s == "none") return config::OffloadDevice::kNone;
  if (s == "cpu") return config::OffloadDevice::kCpu;
  if (s == "nvme") return config::OffloadDevice::kNvme;
  throw UsageError(std::string(option) + ": expected none, cpu or nvme, got '" + s + "'");
}

std::string human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

int64_t dtype_bytes(config::DType d) { return d == config::DType::kFp32 ? 4 : 2; }

// A size option: 0 when absent (the preset's), else its value, which must be positive.
int64_t size_option(const ArgParser& parser, const char* option) {
  const int64_t v = parser.get_int(option, 0);
  DS_CHECK(!parser.has(option) || v > 0, UsageError, "--", option, " must be positive");
  return v;
}

// --model (a preset of --arch) and the options that override it, checked as a run file's model
// section; nullopt without --model.
std::optional<config::ModelConfig> model_of(const ArgParser& parser) {
  config::ModelConfig m;
  m.arch = models::find_arch(parser.get("arch").value_or("")).name;  // ConfigError if unknown
  if (!parser.has("model")) {
    for (const char* o :
         {"n-layer", "n-head", "n-embd", "vocab-size", "dropout", "n-kv-head", "intermediate-size",
          "tie-word-embeddings", "seq", "micro-batch", "number-checkpoints", "budget"})
      DS_CHECK(!parser.has(o), UsageError, "--", o, " needs --model");
    return std::nullopt;
  }
  m.preset = *parser.get("model");
  m.n_layer = size_option(parser, "n-layer");
  m.n_head = size_option(parser, "n-head");
  m.n_embd = size_option(parser, "n-embd");
  m.n_kv_head = size_option(parser, "n-kv-head");
  m.intermediate_size = size_option(parser, "intermediate-size");
  m.vocab_size = parser.has("vocab-size") ? size_option(parser, "vocab-size") : m.vocab_size;
  m.dropout = parser.get_double("dropout", m.dropout);
  DS_CHECK(m.dropout >= 0 && m.dropout < 1, UsageError, "--dropout must be in [0, 1)");
  if (parser.has("tie-word-embeddings")) m.tie_word_embeddings = true;
  config::check_model_section(m, models::arch_schemas(),
                              "estimate");  // the preset applied; ConfigError naming the key
  // A --seq longer than the block size estimates the model that long (its position table too).
  m.block_size = std::max(m.block_size, parser.get_int("seq", m.block_size));
  return m;
}

// --tensor and --pipeline: prints the layout and each stage's parameters per rank; returns the
// heaviest stage's count and sets in.world_size to the data-parallel size.
int64_t model_parallel_params(const ArgParser& parser, const models::ArchEntry& arch,
                              const config::ModelConfig& model, zero::EstimateInput& in) {
  const int64_t heads = model.n_head, kv_heads = model.n_kv_head > 0 ? model.n_kv_head : heads;
  const int64_t tensor = parser.get_int("tensor", 1), stages = parser.get_int("pipeline", 1);
  DS_CHECK(tensor >= 1 && stages >= 1, UsageError, "--tensor and --pipeline must be at least 1");
  DS_CHECK(in.world_size % (tensor * stages) == 0, UsageError, "--ranks ", in.world_size,
           " is not divisible by --tensor ", tensor, " x --pipeline ", stages);
  DS_CHECK(heads % tensor == 0 && kv_heads % tensor == 0, UsageError, "--tensor ", tensor,
           " must divide the heads (", heads, ") and key/value heads (", kv_heads, ")");
  const auto method =
      parallel::parse_partition_method(parser.get("partition").value_or("uniform"), "--partition");
  const auto counts = parallel::model_parallel_counts(
      arch.parameter_shapes(model), arch.tied_parameter(model), arch.tensor_plan(), arch.layer_type,
      int(tensor), int(stages), method);
  in.world_size /= tensor * stages;
  std::printf("layout: %lld ranks = tensor %lld x pipeline %lld x data %lld; partition %s: %s\n",
              static_cast<long long>(in.world_size * tensor * stages),
              static_cast<long long>(tensor), static_cast<long long>(stages),
              static_cast<long long>(in.world_size), parallel::to_string(method).c_str(),
              counts.partition.describe().c_str());
  const int heaviest = counts.heaviest_stage();
  for (int s = 0; s < int(stages); ++s) {
    std::printf("  stage %d: %lld parameters per tensor rank%s\n", s,
                static_cast<long long>(counts.stage_params[size_t(s)]),
                s == heaviest ? " (heaviest: the table below)" : "");
  }
  return counts.stage_params[size_t(heaviest)];
}

// The activation table (and the largest micro-batch within --budget) of `c`, whose architecture
// models its activations.
void print_activations(const ArgParser& parser, const config::ModelConfig& c,
                       const models::ArchEntry& arch, const zero::EstimateInput& in,
                       int64_t stage) {
  const int64_t seq = parser.get_int("seq", c.block_size);
  const int64_t micro = parser.get_int("micro-batch", 1);
  DS_CHECK(seq > 0 && micro > 0, UsageError, "--seq and --micro-batch must be positive");
  std::optional<int64_t> regions;
  if (parser.has("number-checkpoints")) {
    regions = parser.get_int("number-checkpoints", 0);
    DS_CHECK(*regions >= 1, UsageError, "--number-checkpoints must be at least 1");
  }
  const int64_t s = dtype_bytes(in.dtype);
  const auto e = arch.estimate_activations(c, micro, seq, s, regions);
  std::printf(
      "\nactivations per rank kept for backward at the peak (%s %lld layers, %lld heads, %lld "
      "wide, vocabulary %lld, dropout %g; micro-batch %lld of %lld tokens, %s):\n",
      arch.name, static_cast<long long>(c.n_layer), static_cast<long long>(c.n_head),
      static_cast<long long>(c.n_embd), static_cast<long long>(c.vocab_size), c.dropout,
      static_cast<long long>(micro), static_cast<long long>(seq), config::to_string(in.dtype));
  std::printf("  without checkpointing %12s\n", human(e.plain).c_str());
  std::printf("  with checkpointing    %12s  (%lld of %lld blocks recomputed)\n",
              human(e.checkpointed).c_str(), static_cast<long long>(e.regions),
              static_cast<long long>(c.n_layer));
  if (!parser.has("budget")) return;
  const double budget = parser.get_double("budget", 0);
  DS_CHECK(budget > 0, UsageError, "--budget must be positive (bytes per rank)");
  zero::EstimateInput at_stage = in;
  at_stage.stage = int(stage);
  const int64_t states = zero::estimate_model_states(at_stage).on_device();
  // Every activation term grows linearly with the micro-batch.
  const auto one = arch.estimate_activations(c, 1, seq, s, regions);
  auto largest = [&](int64_t per_sequence) -> int64_t {
    return budget <= double(states) ? 0 : int64_t((budget - double(states)) / double(per_sequence));
  };
  std::printf("largest micro-batch within %s per rank (model states at stage %lld: %s):\n",
              human(int64_t(budget)).c_str(), static_cast<long long>(stage), human(states).c_str());
  std::printf("  without checkpointing %6lld\n  with checkpointing    %6lld\n",
              static_cast<long long>(largest(one.plain)),
              static_cast<long long>(largest(one.checkpointed)));
}

}  // namespace

int run_estimate_command(const Args& args) {
  ArgParser parser({"params",
                    "ranks",
                    "stage",
                    "offload",
                    "offload-param",
                    "dtype",
                    "grad-dtype",
                    "reduce-bucket-size",
                    "accumulation",
                    "sub-group-size",
                    "buffer-count",
                    "largest-layer",
                    "model",
                    "n-layer",
                    "n-head",
                    "n-embd",
                    "vocab-size",
                    "dropout",
                    "seq",
                    "micro-batch",
                    "number-checkpoints",
                    "budget",
                    "arch",
                    "n-kv-head",
                    "intermediate-size",
                    "tensor",
                    "pipeline",
                    "partition"},
                   {"help", "overlap-comm", "no-reduce-scatter", "tie-word-embeddings"});
  parser.parse(args);
  if (parser.print_help_if_asked(kEstimateUsage)) return 0;
  parser.reject_positional();
  const auto model = model_of(parser);
  const models::ArchEntry* arch = model ? &models::find_arch(model->arch) : nullptr;
  if (model && arch->estimate_activations == nullptr) {
    for (const char* o : {"seq", "micro-batch", "number-checkpoints", "budget"})
      DS_CHECK(!parser.has(o), UsageError, "--", o, ": the activations of model.arch \"",
               arch->name, "\" are not modelled");
  }
  const int64_t model_params = model ? arch->parameter_count(*model) : -1;
  zero::EstimateInput in;
  in.num_params = parser.get_int("params", model_params);
  DS_CHECK(parser.has("params") || model_params > 0, UsageError,
           "missing required option --params");
  DS_CHECK(in.num_params > 0, UsageError, "--params must be positive");
  in.world_size = parser.get_int("ranks", 1);
  DS_CHECK(in.world_size >= 1, UsageError, "--ranks must be at least 1");
  const bool model_parallel = parser.has("tensor") || parser.has("pipeline");
  if (model_parallel) {
    DS_CHECK(!parser.has("params"), UsageError,
             "--params: with --tensor/--pipeline the parameters come from --model");
    for (const char* o : {"seq", "micro-batch", "number-checkpoints", "budget"})
      DS_CHECK(!parser.has(o), UsageError, "--", o,
               ": the activation estimate does not model tensor/pipeline parallelism");
    DS_CHECK(model, UsageError,
             "--tensor and --pipeline need --model (the split depends on each parameter's shape)");
    in.num_params = model_parallel_params(parser, *arch, *model, in);
  } else {
    DS_CHECK(!parser.has("partition"), UsageError, "--partition needs --pipeline");
  }
  const int64_t marked = parser.get_int("stage", -1);
  DS_CHECK(marked >= -1 && marked <= 3, UsageError, "--stage must be 0, 1, 2 or 3");
  in.dtype = parse_dtype(parser.get("dtype").value_or("bf16"), "--dtype");
  in.grad_dtype = parse_dtype(parser.get("grad-dtype").value_or("fp32"), "--grad-dtype");
  in.offload_optimizer = parse_device(parser.get("offload").value_or("none"), "--offload");
  in.offload_param = parse_device(parser.get("offload-param").value_or("none"), "--offload-param");
  in.reduce_bucket_size = parser.get_int("reduce-bucket-size", 500'000'000);
  DS_CHECK(in.reduce_bucket_size >= 0, UsageError, "--reduce-bucket-size must not be negative");
  in.gradient_accumulation_steps = parser.get_int("accumulation", 1);
  DS_CHECK(in.gradient_accumulation_steps >= 1, UsageError, "--accumulation must be at least 1");
  in.overlap_comm = parser.has("overlap-comm");
  in.reduce_scatter = !parser.has("no-reduce-scatter");

  std::printf(
      "model states per rank: %lld parameters, %lld ranks, %s parameters, %s gradients,"
      " optimizer offload %s, parameter offload %s\n",
      static_cast<long long>(in.num_params), static_cast<long long>(in.world_size),
      config::to_string(in.dtype), config::to_string(in.grad_dtype),
      config::to_string(in.offload_optimizer), config::to_string(in.offload_param));
  in.sub_group_size = parser.get_int("sub-group-size", 1'000'000'000);
  DS_CHECK(in.sub_group_size > 0, UsageError, "--sub-group-size must be positive");
  in.optimizer_buffer_count = parser.get_int("buffer-count", 4);
  DS_CHECK(in.optimizer_buffer_count >= 1, UsageError, "--buffer-count must be at least 1");
  std::printf("%-7s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n", "stage", "params",
              "grads", "master", "optimizer", "on device", "host", "nvme", "swap buf", "comm buf",
              "moved/step");
  for (int stage = 0; stage <= 3; ++stage) {
    in.stage = stage;
    auto e = zero::estimate_model_states(in);
    const int64_t moved = zero::estimate_comm_per_step(in).moved(in.world_size);
    int64_t host = 0, nvme = 0;
    for (const auto* p : {&e.params_at, &e.grads_at, &e.master_at, &e.optimizer_at}) {
      host += p->host;
      nvme += p->nvme;
    }
    std::printf("%s%-5d %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n",
                stage == marked ? "* " : "  ", stage, human(e.params).c_str(),
                human(e.grads).c_str(), human(e.master).c_str(), human(e.optimizer).c_str(),
                human(e.on_device()).c_str(), human(host).c_str(), human(nvme).c_str(),
                human(e.swap_buffers).c_str(), human(e.comm_buffers).c_str(), human(moved).c_str());
  }
  if (parser.has("largest-layer")) {
    const int64_t largest = parser.get_int("largest-layer", 0);
    DS_CHECK(largest > 0, UsageError, "--largest-layer must be positive");
    in.stage = 3;
    const auto ours = zero::estimate_model_states(in);
    const auto ds =
        zero::deepspeed_zero3_estimate(in.num_params, largest, in.world_size, 1,
                                       in.offload_optimizer != config::OffloadDevice::kNone,
                                       in.offload_param != config::OffloadDevice::kNone);
    int64_t host = 0, nvme = 0;
    for (const auto* p : {&ours.params_at, &ours.grads_at, &ours.master_at, &ours.optimizer_at}) {
      host += p->host;
      nvme += p->nvme;
    }
    std::printf(
        "stage 3 beside DeepSpeed's estimate_zero3_model_states_mem_needs(%lld params, largest "
        "layer %lld, %lld ranks on 1 node, cpu_offload=%s, cpu_offload_params=%s):\n"
        "  DeepSpeed: %s per device, %s host memory for the node (x1.5 buffer factor, fp16 "
        "model; NVMe counted as host)\n"
        "  deepshard: %s on the compute device per rank (+ %s of the largest layer gathered), "
        "%s host + %s NVMe per rank; x%lld ranks: %s host + %s NVMe\n",
        static_cast<long long>(in.num_params), static_cast<long long>(largest),
        static_cast<long long>(in.world_size),
        in.offload_optimizer != config::OffloadDevice::kNone ? "True" : "False",
        in.offload_param != config::OffloadDevice::kNone ? "True" : "False",
        human(ds.device_per_rank).c_str(), human(ds.cpu_per_node).c_str(),
        human(ours.on_device()).c_str(), human(zero::dtype_bytes(in.dtype) * largest).c_str(),
        human(host + ours.swap_buffers).c_str(), human(nvme).c_str(),
        static_cast<long long>(in.world_size),
        human(in.world_size * (host + ours.swap_buffers)).c_str(),
        human(in.world_size * nvme).c_str());
  }
  if (model && !model_parallel && arch->estimate_activations != nullptr)
    print_activations(parser, *model, *arch, in, marked < 0 ? 0 : marked);
  return 0;
}

}  // namespace deepshard::cli
