// Schema-wide properties, checked for every key path of the resolved default config (so a key
// added to the schema is tested without touching this file): its default value parses back to
// itself, a value of the wrong type is an error naming the path, integers accept integral floats
// (5e8) and reject fractions, "auto" either resolves or names the key, every key has a row in
// docs/config.md, and the whole resolved config parses back to the same config.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "config/config_test_helpers.h"
#include "support/test_support.h"
#include "util/strings.h"

namespace deepshard::config {
namespace schema_test {

using namespace deepshard::config::testing;
using nlohmann::json;

struct Leaf {
  std::string path;
  json::json_pointer pointer;
  json value;
};

void collect(const json& j, const std::string& path, std::vector<Leaf>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& item : j.items()) {
      collect(item.value(), path.empty() ? item.key() : path + "." + item.key(), out);
    }
    return;
  }
  std::string pointer = "/" + path;
  for (char& c : pointer) c = c == '.' ? '/' : c;
  out.push_back({path, json::json_pointer(pointer), j});
}

const json kBase = {{"train_batch_size", 8}};

std::vector<Leaf> default_leaves() {
  std::vector<Leaf> leaves;
  collect(to_json(parse_ok(kBase).config), "", leaves);
  return leaves;
}

json with_leaf(const Leaf& leaf, const json& value) {
  json j = kBase;
  // A compression parameter needs its block's type (a block without one is an error).
  if (leaf.path.rfind("compression.params.", 0) == 0) j["compression"]["type"] = "powerSGD";
  j[leaf.pointer] = value;
  return j;
}

TEST(Schema, HasEveryDocumentedSection) {
  std::vector<Leaf> leaves = default_leaves();
  EXPECT_GT(leaves.size(), 140u);
  json resolved = to_json(parse_ok(kBase).config);
  for (const char* key : {"zero_optimization", "fp16", "bf16", "optimizer", "scheduler",
                          "activation_checkpointing", "data_types", "tensorboard", "csv_monitor",
                          "wandb", "comet", "comms_logger", "flops_profiler", "checkpoint", "aio",
                          "torch_autocast", "gradient_clipping", "steps_per_print"}) {
    EXPECT_TRUE(resolved.contains(key)) << key;
  }
}

TEST(Schema, EveryKeyIsDocumented) {
  const std::string doc =
      deepshard::testing::read_file(deepshard::testing::source_dir() + "/docs/config.md");
  for (const Leaf& leaf : default_leaves()) {
    EXPECT_NE(doc.find("| `" + leaf.path + "` |"), std::string::npos)
        << leaf.path << " has no row in docs/config.md";
  }
}

TEST(Schema, EveryDefaultValueParsesBackToItself) {
  for (const Leaf& leaf : default_leaves()) {
    Parsed parsed = parse_ok(with_leaf(leaf, leaf.value));
    EXPECT_EQ(to_json(parsed.config)[leaf.pointer], leaf.value) << leaf.path;
    EXPECT_TRUE(parsed.warnings.empty()) << leaf.path << ": " << parsed.warnings.front();
  }
}

TEST(Schema, EveryWrongTypeIsOneErrorNamingThePath) {
  const json wrong = json::array({json::object()});  // wrong for every key
  for (const Leaf& leaf : default_leaves()) {
    std::string message = parse_error(with_leaf(leaf, wrong));
    EXPECT_EQ(message.rfind("test.json: " + leaf.path + ": expected ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("found a list [{}]"), std::string::npos) << message;
  }
}

TEST(Schema, BooleansAndNumbersDoNotMix) {
  for (const Leaf& leaf : default_leaves()) {
    if (leaf.value.is_boolean()) {
      std::string message = parse_error(with_leaf(leaf, 1));
      EXPECT_EQ(message,
                "test.json: " + leaf.path + ": expected a boolean (true or false), found 1");
    } else if (leaf.value.is_number()) {
      std::string message = parse_error(with_leaf(leaf, true));
      EXPECT_EQ(message.rfind("test.json: " + leaf.path + ": expected ", 0), 0u) << message;
      EXPECT_NE(message.find("found true (booleans are not numbers)"), std::string::npos)
          << message;
    }
  }
}

TEST(Schema, IntegersAcceptIntegralFloatsAndRejectFractions) {
  int checked = 0;
  for (const Leaf& leaf : default_leaves()) {
    if (!leaf.value.is_number_integer()) continue;
    const int64_t v = leaf.value.get<int64_t>();
    if (std::llabs(v) > (int64_t{1} << 53)) continue;  // not exactly representable as a double
    if (leaf.path == "train_micro_batch_size_per_gpu" ||
        leaf.path == "gradient_accumulation_steps") {
      continue;  // must stay consistent with train_batch_size; checked in batch_size_test
    }
    json as_float = static_cast<double>(v);
    ASSERT_TRUE(as_float.is_number_float());
    EXPECT_EQ(to_json(parse_ok(with_leaf(leaf, as_float)).config)[leaf.pointer], v) << leaf.path;
    const double fraction = static_cast<double>(v) + 0.5;
    std::string message = parse_error(with_leaf(leaf, fraction));
    EXPECT_EQ(message,
              "test.json: " + leaf.path + ": expected an integer, found " + json(fraction).dump());
    ++checked;
  }
  EXPECT_GT(checked, 25);
}

TEST(Schema, AutoEitherResolvesOrNamesTheKey) {
  int errors = 0;
  for (const Leaf& leaf : default_leaves()) {
    if (leaf.path == "scheduler") continue;  // a section, not a value
    // An unresolved batch size is reported at the micro batch size, the one a run must give.
    const bool batch =
        leaf.path == "train_batch_size" || leaf.path == "gradient_accumulation_steps";
    const std::string path = batch ? "train_micro_batch_size_per_gpu" : leaf.path;
    std::vector<std::string> warnings;
    try {
      parse_ds_config(with_leaf(leaf, "auto"), context(), &warnings);
    } catch (const ConfigError& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).rfind("test.json: " + path +
                                                ": \"auto\" cannot be resolved: "
                                                "set ",
                                            0),
                0u)
          << e.what();
    }
  }
  EXPECT_GE(errors, 2);  // at least optimizer.params.lr and train_batch_size
}

TEST(Schema, ResolvedConfigParsesBackToTheSameConfig) {
  json original = {
      {"train_micro_batch_size_per_gpu", 2},
      {"gradient_accumulation_steps", 3},
      {"zero_optimization",
       {{"stage", 3},
        {"cpu_offload", true},
        {"stage3_prefetch_bucket_size", 1e7},
        {"offload_param", {{"device", "nvme"}, {"nvme_path", "/tmp/nvme"}}}}},
      {"bfloat16", {{"enabled", true}}},
      {"optimizer", {{"type", "adamw"}, {"params", {{"lr", 3e-4}, {"betas", {0.8, 0.95}}}}}},
      {"scheduler", {{"type", "OneCycle"}, {"params", {{"cycle_min_lr", 0}, {"cycle_max_lr", 1}}}}},
      {"tensorboard", {{"enabled", true}, {"output_path", "tb"}}},
  };
  json resolved = to_json(parse_ok(original, context(2)).config);
  EXPECT_EQ(resolved["train_batch_size"], 12);
  EXPECT_EQ(resolved["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(resolved["bf16"]["enabled"], true);
  EXPECT_EQ(resolved["optimizer"]["type"], "AdamW");
  Parsed again = parse_ok(resolved, context(2));
  EXPECT_EQ(to_json(again.config), resolved);
  EXPECT_TRUE(again.warnings.empty());
}

}  // namespace schema_test
}  // namespace deepshard::config
