// `deepshard generate --weights FILE --prompt TEXT [--model PRESET | --config RUN.json]
// [--max-new-tokens N] [--temperature T] [--top-k K] [--seed S]`: prints a continuation of the
// prompt sampled from Hugging Face GPT-2 safetensors weights (as `deepshard train` writes with
// model.init_from's format), with the byte tokenizer.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "deepshard/checkpoint/hf_gpt2.h"
#include "deepshard/config/loader.h"
#include "deepshard/data/tokenizer.h"
#include "deepshard/models/gpt.h"
#include "deepshard/train/trainer.h"
#include "deepshard/util/error.h"

namespace deepshard::cli {
namespace {

const char* kUsage =
    "usage: deepshard generate --weights FILE.safetensors --prompt TEXT\n"
    "                          [--model PRESET | --config RUN.json] [--max-new-tokens N]\n"
    "                          [--temperature T] [--top-k K] [--seed S]\n"
    "\n"
    "Builds the model (a preset: tiny, small, gpt2; or the model section of a run config),\n"
    "loads Hugging Face GPT-2 safetensors weights into it and prints the prompt followed by\n"
    "N sampled bytes (default 200, temperature 0.8, top-k 40, seed 1234).\n";

config::ModelConfig model_config(const ArgParser& parser) {
  DS_CHECK(!(parser.has("model") && parser.has("config")), UsageError,
           "--model and --config are exclusive");
  if (auto path = parser.get("config")) {
    return config::parse_run_config(config::read_json_file(*path), 1, nullptr, *path).model;
  }
  config::ModelConfig model;
  model.preset = parser.get("model").value_or("tiny");
  config::apply_model_preset(model);
  return model;
}

}  // namespace

int run_generate_command(const Args& args) {
  ArgParser parser({"weights", "checkpoint", "prompt", "model", "config", "max-new-tokens",
                    "temperature", "top-k", "seed"},
                   {"help"});
  parser.parse(args);
  if (parser.print_help_if_asked(kUsage)) return 0;
  parser.reject_positional();
  DS_CHECK(!parser.has("checkpoint"), UsageError,
           "--checkpoint: not supported yet (engine checkpoints do not exist yet); use --weights");
  const auto weights = parser.get("weights");
  DS_CHECK(weights.has_value(), UsageError, "missing required option --weights");
  const auto prompt_text = parser.get("prompt");
  DS_CHECK(prompt_text.has_value(), UsageError, "missing required option --prompt");
  const int64_t max_new = parser.get_int("max-new-tokens", 200);
  DS_CHECK(max_new >= 0, UsageError, "--max-new-tokens must be >= 0");
  const double temperature = parser.get_double("temperature", 0.8);
  DS_CHECK(temperature > 0, UsageError, "--temperature must be > 0");

  models::Gpt model(train::gpt_config(model_config(parser)), /*seed=*/0);
  checkpoint::load_gpt2_safetensors(model, *weights);
  model->eval();
  data::ByteTokenizer tokenizer;
  auto prompt16 = tokenizer.encode(*prompt_text);
  std::vector<int64_t> prompt(prompt16.begin(), prompt16.end());
  auto tokens = model->generate(prompt, max_new, temperature, parser.get_int("top-k", 40),
                                static_cast<uint64_t>(parser.get_int("seed", 1234)));
  std::printf("%s%s\n", prompt_text->c_str(), tokenizer.decode(tokens).c_str());
  return 0;
}

}  // namespace deepshard::cli
