// MiCS's keys in the config (src/config/mics_check.cpp): accepted at stage 3 when the shard size
// divides the job's ranks, refused naming the key and both numbers otherwise, warned (ignored) at
// other stages or without a shard size, refused with the features MiCS does not combine with yet.
#include <gtest/gtest.h>

#include "config/config_test_helpers.h"

namespace deepshard::config {
namespace mics_check_test {

using namespace deepshard::config::testing;
using nlohmann::json;

json mics(int stage, int64_t shard, const json& more = json::object()) {
  json zero = {{"stage", stage}, {"mics_shard_size", shard}};
  zero.merge_patch(more);
  return {{"train_batch_size", 12}, {"zero_optimization", zero}};
}

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

TEST(MicsConfig, ShardSizeDividingTheJobIsAcceptedAndImplemented) {
  for (const auto& [world, shard] : {std::pair{4, 2}, {4, 4}, {3, 1}, {3, 3}, {4, 1}}) {
    const Parsed p =
        parse_ok(mics(3, shard, {{"mics_hierarchical_params_gather", true}}), context(world));
    EXPECT_EQ(p.config.zero.mics_shard_size, shard);
    EXPECT_TRUE(p.config.zero.mics_hierarchical_params_gather);
    EXPECT_TRUE(unsupported_features(p.config).empty()) << world << " ranks, shard " << shard;
    EXPECT_FALSE(any_contains(p.warnings, "mics_shard_size")) << world << " ranks, shard " << shard;
    // The 2-hop gather is not in effect yet: the key warns naming itself.
    EXPECT_TRUE(any_contains(p.warnings, "mics_hierarchical_params_gather: the shard group's"))
        << world << " ranks, shard " << shard;
  }
}

TEST(MicsConfig, ShardSizeNotDividingTheJobIsRefusedNamingBoth) {
  const std::string e = parse_error(mics(3, 2), context(3));
  EXPECT_NE(e.find("zero_optimization.mics_shard_size"), std::string::npos) << e;
  EXPECT_NE(e.find("2 does not divide the job's 3 data-parallel ranks"), std::string::npos) << e;
  const std::string larger = parse_error(mics(3, 8), context(4));
  EXPECT_NE(larger.find("8 does not divide the job's 4"), std::string::npos) << larger;
}

TEST(MicsConfig, IgnoredKeysWarn) {
  const Parsed stage2 = parse_ok(mics(2, 2), context(4));
  EXPECT_TRUE(
      any_contains(stage2.warnings, "MiCS partitions ZeRO stage 3 only; ignored at stage 2"));
  const Parsed no_shard =
      parse_ok(mics(3, -1, {{"mics_hierarchical_params_gather", true}}), context(4));
  EXPECT_TRUE(any_contains(no_shard.warnings, "only used with zero_optimization.mics_shard_size"));
}

TEST(MicsConfig, CombinationsNotBuiltAreRefusedNamingTheKeys) {
  const std::pair<json, std::string> cases[] = {
      {{{"offload_optimizer", {{"device", "cpu"}}}}, "zero_optimization.offload_optimizer"},
      {{{"offload_param", {{"device", "cpu"}}}}, "zero_optimization.offload_param"},
      {{{"zero_hpz_partition_size", 2}}, "zero_optimization.zero_hpz_partition_size"},
      {{{"zero_quantized_weights", true}}, "zero_optimization.zero_quantized_weights"},
      {{{"zero_quantized_gradients", true}}, "zero_optimization.zero_quantized_gradients"},
  };
  for (const auto& [more, key] : cases) {
    const std::string e = parse_error(mics(3, 2, more), context(4));
    EXPECT_NE(e.find("zero_optimization.mics_shard_size"), std::string::npos) << e;
    EXPECT_NE(e.find("MiCS with " + key + ": not supported yet"), std::string::npos) << e;
  }
  const std::string tp =
      parse_error(json{{"train_batch_size", 12},
                       {"zero_optimization", {{"stage", 3}, {"mics_shard_size", 2}}},
                       {"tensor_parallel", {{"size", 2}}}},
                  context(4));
  EXPECT_NE(tp.find("MiCS with pipeline or tensor parallelism"), std::string::npos) << tp;
}

}  // namespace mics_check_test
}  // namespace deepshard::config
