// models::find_arch and every registered architecture's entry, checked against the model the
// entry builds: an unknown name lists the known ones and "" is the default; the shapes (names,
// order, pipeline items) and counts without a model equal the built model's; the tensor plan the
// entry gives is the one the model's sharding plan declares; the saved fields round-trip; the
// Hugging Face layout saves and loads the model exactly; every preset passes the entry's checks.
#include "models/registry.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "models/hf_weights.h"
#include "support/test_support.h"

namespace deepshard::models {
namespace registry_test {

// A small model section of `arch` (its first preset, shrunk).
config::ModelConfig small_section(const ArchEntry& arch) {
  config::ModelConfig m;
  m.arch = arch.name;
  m.preset = arch.presets().front().name;
  m.n_layer = 2;
  m.block_size = 16;
  m.vocab_size = 64;
  config::check_model_section(m, arch_schemas(), "test");
  return m;
}

TEST(ArchRegistry, UnknownNamesListTheKnownOnesAndEmptyIsTheDefault) {
  const std::vector<std::string> names = arch_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(find_arch("").name, names.front());
  try {
    find_arch("bert-ish");
    FAIL() << "an unknown architecture was found";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("model.arch: unknown architecture \"bert-ish\""), std::string::npos);
    for (const std::string& n : names) EXPECT_NE(message.find(n), std::string::npos) << message;
  }
  ASSERT_EQ(arch_schemas().size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(arch_schemas()[i].name, names[i]);
}

TEST(ArchRegistry, EveryPresetPassesItsArchitecturesChecks) {
  for (const std::string& name : arch_names()) {
    for (const config::ModelPreset& preset : find_arch(name).presets()) {
      config::ModelConfig m;
      m.arch = name;
      m.preset = preset.name;
      EXPECT_NO_THROW(config::check_model_section(m, arch_schemas(), "test"))
          << name << " " << preset.name;
      EXPECT_EQ(m.n_layer, preset.n_layer);
    }
  }
}

TEST(ArchRegistry, ShapesCountsAndPipelineItemsMatchTheBuiltModel) {
  for (const std::string& name : arch_names()) {
    const ArchEntry& arch = find_arch(name);
    const config::ModelConfig m = small_section(arch);
    auto model = arch.make_model(m, 3, nullptr);
    EXPECT_EQ(model->arch(), name);
    const auto params = model->named_parameters();
    const auto shapes = arch.parameter_shapes(m);
    ASSERT_EQ(shapes.size(), params.size()) << name;
    const auto embedding = model->embedding_parameters();
    // The parameters of each unit of the sharding plan (layer i).
    const sharding::ShardingPlan plan = model->sharding_plan();
    ASSERT_EQ(int64_t(plan.units().size()), model->num_layers());
    std::vector<std::set<const c10::TensorImpl*>> in_layer(plan.units().size());
    for (size_t u = 0; u < plan.units().size(); ++u) {
      for (const auto& p : plan.units()[u].module->parameters())
        in_layer[u].insert(p.unsafeGetTensorImpl());
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto& p = params[i];
      EXPECT_EQ(shapes[i].name, p.key()) << name;
      EXPECT_EQ(at::IntArrayRef(shapes[i].shape), p.value().sizes()) << p.key();
      int64_t item = NamedShape::kHead;
      if (std::find(embedding.begin(), embedding.end(), p.key()) != embedding.end())
        item = NamedShape::kEmbedding;
      for (size_t u = 0; u < plan.units().size(); ++u) {
        if (in_layer[u].count(p.value().unsafeGetTensorImpl())) item = int64_t(u);
      }
      EXPECT_EQ(shapes[i].item, item) << p.key();
    }
    EXPECT_EQ(arch.parameter_count(m), model->num_parameters()) << name;
    const std::string tied = arch.tied_parameter(m);
    EXPECT_EQ(plan.tied().empty(), tied.empty()) << name;
    if (!tied.empty()) {
      EXPECT_EQ(plan.tied().front().param, tied);
    }
  }
}

TEST(ArchRegistry, TheEntrysTensorPlanIsTheOneTheModelDeclares) {
  for (const std::string& name : arch_names()) {
    const ArchEntry& arch = find_arch(name);
    if (arch.make_tensor_parallel == nullptr) continue;
    const config::ModelConfig m = small_section(arch);
    auto model = arch.make_model(m, 3, nullptr);
    const sharding::TensorPlan declared = model->sharding_plan().tensor_plan();
    const sharding::TensorPlan entry = arch.tensor_plan();
    int split = 0;
    for (const auto& p : model->named_parameters()) {
      EXPECT_EQ(declared.split(p.key()), entry.split(p.key())) << p.key();
      split += declared.split(p.key()) != sharding::TensorSplit::kReplicated;
    }
    EXPECT_GT(split, 0) << name << " declares a tensor-parallel model but splits nothing";
  }
}

TEST(ArchRegistry, SavedFieldsRoundTrip) {
  for (const std::string& name : arch_names()) {
    const ArchEntry& arch = find_arch(name);
    const config::ModelConfig m = small_section(arch);
    nlohmann::json saved;
    arch.save_fields(m, saved);
    config::ModelConfig back = m;
    back.bias.reset();
    back.rope_theta.reset();
    back.rms_norm_eps.reset();
    back.tie_word_embeddings.reset();
    arch.load_fields(saved, back);
    nlohmann::json again;
    arch.save_fields(back, again);
    EXPECT_EQ(saved, again) << name;
  }
}

TEST(ArchRegistry, HuggingFaceLayoutSavesAndLoadsExactly) {
  testing::TempDir dir;
  for (const std::string& name : arch_names()) {
    const ArchEntry& arch = find_arch(name);
    const config::ModelConfig m = small_section(arch);
    auto source = arch.make_model(m, 1, nullptr);
    auto target = arch.make_model(m, 2, nullptr);
    const at::Tensor idx = torch::arange(24, torch::kLong).remainder(64).view({2, 12});
    const at::Tensor expected = source->forward(idx).detach();
    ASSERT_FALSE(torch::equal(target->forward(idx), expected)) << name;
    const std::string path = dir.file(name + ".safetensors");
    save_hf_safetensors(*source, path);
    load_hf_safetensors(*target, path);
    EXPECT_TRUE(torch::equal(target->forward(idx), expected)) << name;
  }
}

}  // namespace registry_test
}  // namespace deepshard::models
