// `deepshard convert CKPT --to safetensors OUT [--dtype fp32|bf16|fp16] [--tag TAG]`: writes a
// checkpoint's consolidated weights (its fp32 masters, assembled from every rank's shard file) as
// one Hugging Face safetensors file with the names and layout of the checkpoint's architecture
// (model.arch of the model section saved with it: its registry entry's layout), the format
// `model.init_from` and `generate --weights` read. No engine and no ranks are needed: any world
// size and stage converts the same way.
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/util/error.h"
#include "models/hf_weights.h"
#include "models/registry.h"

namespace deepshard::cli {
namespace {

const char* kConvertUsage =
    "usage: deepshard convert CKPT --to safetensors OUT [--dtype fp32|bf16|fp16] [--tag TAG]\n"
    "\n"
    "CKPT is a checkpoint directory (its 'latest' tag, or --tag) or one tag directory. Writes the\n"
    "consolidated weights in the given dtype (default fp32) with the Hugging Face names and\n"
    "layout of the checkpoint's architecture (its model.arch; docs/checkpoint.md lists them).\n";

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  throw UsageError("--dtype: '" + name + "' (fp32, bf16 or fp16)");
}

}  // namespace

// The tag directory CKPT names: itself if it holds a manifest, else <CKPT>/<tag or latest>.
std::string checkpoint_tag_dir(const std::string& path, const std::string& tag) {
  if (tag.empty() &&
      std::filesystem::exists(std::filesystem::path(path) / checkpoint::kManifestName))
    return path;
  return checkpoint::resolve_tag(path, tag);
}

int run_convert_command(const Args& args) {
  ArgParser parser({"to", "dtype", "tag"}, {"help"});
  parser.parse(args);
  if (parser.print_help_if_asked(kConvertUsage)) return 0;
  DS_CHECK(parser.positional().size() == 2, UsageError,
           "expected CKPT and OUT (deepshard convert CKPT --to safetensors OUT)");
  DS_CHECK(parser.get("to").value_or("") == "safetensors", UsageError,
           "--to: only 'safetensors' is supported");
  const at::ScalarType dtype = parse_dtype(parser.get("dtype").value_or("fp32"));
  const std::string dir =
      checkpoint_tag_dir(parser.positional()[0], parser.get("tag").value_or(""));
  const std::string& out = parser.positional()[1];
  checkpoint::CheckpointReader reader(dir);
  const auto weights = reader.consolidated_weights();
  // Checkpoints written before model.arch existed hold the default architecture's model.
  const auto& client = reader.client_state();
  const std::string arch =
      models::find_arch(client.contains("model") ? client.at("model").value("arch", std::string())
                                                 : std::string())
          .name;
  models::save_hf_safetensors(arch, weights, out, dtype);
  std::printf("%s: %zu tensors (%s) from %s (saved by %d rank(s), ZeRO stage %d)\n", out.c_str(),
              weights.size(), arch.c_str(), dir.c_str(), reader.world_size(), reader.zero_stage());
  return 0;
}

}  // namespace deepshard::cli
