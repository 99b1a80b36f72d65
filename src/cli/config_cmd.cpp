// `deepshard config check FILE... [--world-size N] [--run] [--set key.path=value]...`: parses each
// file as a run file (it has a model/data/train/comm section, or --run) or a DeepSpeed config, and
// prints the resolved config, the warnings, what the engine does not support yet, or every error.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "models/registry.h"
#include "util/strings.h"

namespace deepshard::cli {

namespace {

const char* const kConfigUsage =
    "usage: deepshard config check FILE... [--world-size N] [--run] [--set key.path=value]...\n"
    "\n"
    "Validates DeepSpeed configs and deepshard run files: prints the resolved config (defaults\n"
    "filled, \"auto\" resolved), warnings, and the features the engine does not support yet.\n"
    "Exits 0 when every file is valid and runnable, 1 otherwise.\n"
    "\n"
    "  --world-size N   data-parallel world size for the batch triple (default 1)\n"
    "  --run            parse every file as a run file (default: files with a model, data,\n"
    "                   train or comm section)\n"
    "  --set K=V        override a key before parsing (repeatable); V is JSON or a plain string\n";

struct CheckOptions {
  std::vector<std::string> files;
  int64_t world_size = 1;
  bool run = false;
  std::vector<std::string> overrides;
};

bool is_run_file(const nlohmann::json& json) {
  if (!json.is_object()) return false;
  for (const char* key : {"model", "data", "task", "train", "comm"}) {
    if (json.contains(key)) return true;
  }
  return false;
}

void print_lines(const char* prefix, const std::string& text) {
  for (const auto& line : strings::split(text, '\n')) std::printf("%s%s\n", prefix, line.c_str());
}

// Checks one file and prints its report; true when it is valid and runnable.
bool check_file(const std::string& path, const CheckOptions& options) {
  std::vector<std::string> warnings;
  bool ok = false;
  std::printf("== %s\n", path.c_str());
  try {
    nlohmann::json json = config::read_json_file(path);
    for (const auto& assignment : options.overrides) config::apply_override(json, assignment);
    const bool run = options.run || is_run_file(json);
    std::printf("parsed as a %s, data-parallel world size %lld\n",
                run ? "run file" : "DeepSpeed config", static_cast<long long>(options.world_size));
    config::DsConfig ds;
    std::string resolved;
    if (run) {
      config::RunConfig run_config = config::parse_run_config(json, options.world_size, &warnings,
                                                              path, models::arch_schemas());
      ds = run_config.ds;
      resolved = run_config.resolved_json;
    } else {
      config::ResolveContext context;
      context.dp_world_size = options.world_size;
      context.origin = path;
      ds = config::parse_ds_config(json, context, &warnings);
      resolved = config::to_json(ds).dump(2);
    }
    std::printf("%s\n", resolved.c_str());
    for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
    std::vector<std::string> unsupported = config::unsupported_features(ds);
    for (const auto& u : unsupported) std::printf("%s\n", u.c_str());
    ok = unsupported.empty();
    if (ok) {
      std::printf("%s: valid and runnable\n", path.c_str());
    } else {
      std::printf("%s: valid, but not runnable yet (%zu unsupported feature%s)\n", path.c_str(),
                  unsupported.size(), unsupported.size() == 1 ? "" : "s");
    }
  } catch (const Error& e) {
    for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
    print_lines("error: ", e.what());
    std::printf("%s: invalid\n", path.c_str());
  }
  return ok;
}

}  // namespace

int run_config_command(const Args& args) {
  ArgParser parser({"world-size", "set"}, {"run", "help"});
  parser.parse(args);
  if (parser.print_help_if_asked(kConfigUsage)) return 0;
  const std::vector<std::string>& positional = parser.positional();
  DS_CHECK(!positional.empty(), UsageError, "missing subcommand (expected: check)");
  DS_CHECK(positional[0] == "check", UsageError, "unknown subcommand '", positional[0],
           "' (expected: check)");
  CheckOptions options;
  options.files.assign(positional.begin() + 1, positional.end());
  DS_CHECK(!options.files.empty(), UsageError, "config check: no FILE given");
  options.world_size = parser.get_int("world-size", 1);
  DS_CHECK(options.world_size >= 1, UsageError, "option --world-size: must be >= 1, got ",
           options.world_size);
  options.run = parser.has("run");
  options.overrides = parser.get_all("set");

  bool all_ok = true;
  for (const auto& file : options.files) all_ok = check_file(file, options) && all_ok;
  std::fflush(stdout);
  return all_ok ? 0 : 1;
}

}  // namespace deepshard::cli
