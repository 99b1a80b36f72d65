// The architecture registry (registry.h): one line per architecture, each entry defined in its
// folder (src/models/<arch>/entry.cpp).
#include "models/registry.h"

#include "deepshard/util/error.h"

namespace deepshard::models {

const ArchEntry& gpt_entry();
const ArchEntry& llama_entry();
const ArchEntry& bert_entry();

namespace {

using EntryOf = const ArchEntry& (*)();
// The registry: adding an architecture is its folder and one line here (and its declaration
// above). The first is the default architecture (a model section or checkpoint naming none).
constexpr EntryOf kArchs[] = {
    gpt_entry,
    llama_entry,
    bert_entry,
};

}  // namespace

std::vector<std::string> arch_names() {
  std::vector<std::string> names;
  for (EntryOf entry : kArchs) names.emplace_back(entry().name);
  return names;
}

const ArchEntry& find_arch(const std::string& name) {
  if (name.empty()) return kArchs[0]();
  for (EntryOf entry : kArchs) {
    if (name == entry().name) return entry();
  }
  std::string known;
  for (const std::string& n : arch_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("model.arch: unknown architecture \"" + name + "\" (known: " + known + ")");
}

const config::ArchSchemas& arch_schemas() {
  static const config::ArchSchemas schemas = [] {
    config::ArchSchemas out;
    for (EntryOf entry : kArchs)
      out.push_back({entry().name, entry().presets(), entry().check_model});
    return out;
  }();
  return schemas;
}

}  // namespace deepshard::models
