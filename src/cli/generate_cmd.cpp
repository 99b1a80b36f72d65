// `deepshard generate (--weights FILE | --checkpoint DIR) --prompt TEXT [--model PRESET |
// --config RUN.json] [--max-new-tokens N] [--temperature T] [--top-k K] [--seed S]`: prints a
// continuation of the prompt sampled from Hugging Face safetensors weights (model.init_from's
// format: the Hugging Face names of the model's arch) or from a deepshard checkpoint (its
// consolidated fp32 weights; the model's architecture and sizes come from the run's model section
// saved with it), with the tokenizer of the model's vocabulary (256: bytes, 50257: the BPE of
// data::Gpt2Tokenizer).
// --temperature 0 is greedy (argmax) decoding.
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "data/tokenizer.h"
#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/config/loader.h"
#include "deepshard/train/model_factory.h"
#include "deepshard/util/error.h"
#include "models/hf_weights.h"
#include "models/registry.h"

namespace deepshard::cli {
namespace {

const char* kGenerateUsage =
    "usage: deepshard generate (--weights FILE.safetensors | --checkpoint DIR) --prompt TEXT\n"
    "                          [--model PRESET | --config RUN.json] [--max-new-tokens N]\n"
    "                          [--temperature T] [--top-k K] [--seed S] [--bpe-dir DIR]\n"
    "\n"
    "Builds the model (a preset of the default architecture; or the model section of a run\n"
    "config, any model.arch; with --checkpoint, by default the model section saved in the\n"
    "checkpoint), loads Hugging Face safetensors weights (the names of its model.arch) or a\n"
    "deepshard\n"
    "checkpoint (a checkpoint directory's latest tag, or one tag directory) into it and prints\n"
    "the prompt followed by N sampled tokens (default 200, temperature 0.8, top-k 40, seed 1234;\n"
    "temperature 0: greedy). A model with 256 tokens reads bytes, one with 50257 GPT-2's BPE\n"
    "(--bpe-dir DIR: the folder of its encoder.json and vocab.bpe).\n";

config::ModelConfig model_config(const ArgParser& parser,
                                 const checkpoint::CheckpointReader* reader) {
  DS_CHECK(!(parser.has("model") && parser.has("config")), UsageError,
           "--model and --config are exclusive");
  if (auto path = parser.get("config")) {
    return config::parse_run_config(config::read_json_file(*path), 1, nullptr, *path,
                                    models::arch_schemas())
        .model;
  }
  if (reader != nullptr && !parser.has("model") && reader->client_state().contains("model")) {
    // The architecture and sizes `deepshard train` saved with the checkpoint.
    return train::model_from_saved_json(reader->client_state().at("model"));
  }
  config::ModelConfig model;
  model.preset = parser.get("model").value_or("tiny");
  config::apply_model_preset(model, models::arch_schemas());
  return model;
}

}  // namespace

int run_generate_command(const Args& args) {
  ArgParser parser({"weights", "checkpoint", "prompt", "model", "config", "max-new-tokens",
                    "temperature", "top-k", "seed", "bpe-dir"},
                   {"help"});
  parser.parse(args);
  if (parser.print_help_if_asked(kGenerateUsage)) return 0;
  parser.reject_positional();
  const auto weights = parser.get("weights");
  const auto checkpoint_path = parser.get("checkpoint");
  DS_CHECK(weights.has_value() != checkpoint_path.has_value(), UsageError,
           "give one of --weights and --checkpoint");
  const auto prompt_text = parser.get("prompt");
  DS_CHECK(prompt_text.has_value(), UsageError, "missing required option --prompt");
  const int64_t max_new = parser.get_int("max-new-tokens", 200);
  DS_CHECK(max_new >= 0, UsageError, "--max-new-tokens must be >= 0");
  const double temperature = parser.get_double("temperature", 0.8);
  DS_CHECK(temperature >= 0, UsageError, "--temperature must be >= 0 (0: greedy)");

  std::unique_ptr<checkpoint::CheckpointReader> reader;
  if (checkpoint_path)
    reader =
        std::make_unique<checkpoint::CheckpointReader>(checkpoint_tag_dir(*checkpoint_path, ""));
  const auto model = train::make_model(model_config(parser, reader.get()), /*seed=*/0);
  if (reader) {
    std::map<std::string, at::Tensor> params;
    for (const auto& p : model->named_parameters()) params.emplace(p.key(), p.value());
    checkpoint::load_consolidated_weights(*reader, params);
  } else {
    models::load_hf_safetensors(*model, *weights);
  }
  model->eval();
  const auto tokenizer =
      data::tokenizer_for_vocab(model->vocab_size(), parser.get("bpe-dir").value_or(""));
  auto prompt16 = tokenizer->encode(*prompt_text);
  std::vector<int64_t> prompt(prompt16.begin(), prompt16.end());
  auto tokens = model->generate(prompt, max_new, temperature, parser.get_int("top-k", 40),
                                static_cast<uint64_t>(parser.get_int("seed", 1234)));
  std::printf("%s%s\n", prompt_text->c_str(), tokenizer->decode(tokens).c_str());
  return 0;
}

}  // namespace deepshard::cli
