// The tuning space (tuning_space.h).
#include "autotune/tuning_space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "autotune/user_job.h"
#include "deepshard/util/error.h"

namespace deepshard::autotune {
namespace {

std::optional<int64_t> as_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())
    return static_cast<int64_t>(v.get<double>());
  return std::nullopt;
}

// "5e7" style for the knob values in names (DeepSpeed's canonical names print the values).
std::string name_value(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) {
    const double d = v.get<double>();
    if (d >= 1e4 && std::fmod(d, 1.0) == 0) {
      char text[32];
      std::snprintf(text, sizeof text, "%.0e", d);
      std::string s = text;
      s.erase(std::remove(s.begin(), s.end(), '+'), s.end());
      const size_t zero = s.find("e0");
      if (zero != std::string::npos) s.erase(zero + 1, 1);
      return s;
    }
    return v.dump();
  }
  if (v.is_object() && v.contains("device")) return v.at("device").get<std::string>();
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// "zero_optimization.reduce_bucket_size" -> "rbs" (initials of the last key's words).
std::string short_key(const std::string& path) {
  const std::string last = path.substr(path.rfind('.') + 1);
  std::string out;
  bool start = true;
  for (char ch : last) {
    if (ch == '_') {
      start = true;
    } else if (start) {
      out += ch;
      start = false;
    }
  }
  return path.rfind("train.", 0) == 0 || path.rfind("comm.", 0) == 0 ? path.substr(0, 1) + out
                                                                     : out;
}

}  // namespace

std::vector<int> stages_to_tune(const SpaceContext& c) {
  const nlohmann::json stage = value_at_path(*c.user_config, "zero_optimization.stage");
  std::vector<int> out;
  if (stage.is_array()) {
    for (const auto& s : stage) {
      const auto v = as_integer(s);
      DS_CHECK(v && *v >= 0 && *v <= 3, ConfigError,
               "zero_optimization.stage: the tuner's list holds stages 0-3, found ", s.dump());
      out.push_back(static_cast<int>(*v));
    }
  } else {
    out = {0, 1, 2, 3};
  }
  DS_CHECK(!out.empty(), ConfigError, "zero_optimization.stage: no stage left to tune");
  return out;
}

std::optional<std::vector<int64_t>> user_micro_batch_list(const SpaceContext& c) {
  const nlohmann::json mbs = value_at_path(*c.user_config, "train_micro_batch_size_per_gpu");
  if (!mbs.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& m : mbs) {
    const auto v = as_integer(m);
    if (v && *v >= 1) out.push_back(*v);  // DeepSpeed keeps the integers of the list
  }
  DS_CHECK(!out.empty(), ConfigError,
           "train_micro_batch_size_per_gpu: the tuner's list holds no positive integer");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t min_micro_batch(const SpaceContext& c) {
  const auto v = as_integer(value_at_path(*c.user_config, "train_micro_batch_size_per_gpu"));
  if (v && *v >= 1) return *v;
  const auto t = as_integer(value_at_path(*c.user_config, "train.micro_batch_size"));
  if (t && *t >= 1) return *t;  // what fills "auto" in a run file
  return c.autotuning.min_train_micro_batch_size_per_gpu;
}

int64_t user_accumulation(const SpaceContext& c) {
  const auto v = as_integer(value_at_path(*c.user_config, "gradient_accumulation_steps"));
  if (v && *v >= 1) return *v;
  const auto t = as_integer(value_at_path(*c.user_config, "train.gradient_accumulation_steps"));
  return t && *t >= 1 ? *t : 1;
}

int64_t max_micro_batch(const SpaceContext& c) {
  int64_t hi = c.autotuning.max_train_micro_batch_size_per_gpu;
  if (c.autotuning.max_train_batch_size) {
    hi = std::min(hi, std::max<int64_t>(1, *c.autotuning.max_train_batch_size / c.data_parallel));
  }
  return hi;
}

std::vector<int64_t> micro_batch_candidates(int64_t lo, int64_t hi, int64_t num) {
  std::vector<int64_t> out;
  if (hi < lo) return {lo};
  out.push_back(lo);
  const int64_t start = std::max(lo, hi / 2);
  const int64_t stride = std::max<int64_t>(1, (hi - start) / std::max<int64_t>(1, num));
  for (int64_t m = start; m < hi; m += stride) {
    if (hi / m != 1) out.push_back(m);  // the same accumulation as hi: nothing new to learn
  }
  out.push_back(hi);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t batch_per_replica(const SpaceContext& c, int64_t largest) {
  if (c.autotuning.max_train_batch_size)
    return std::max<int64_t>(1, *c.autotuning.max_train_batch_size / c.data_parallel);
  return largest * user_accumulation(c);
}

Experiment make_experiment(const SpaceContext& c, int stage, int64_t micro_batch,
                           int64_t per_replica, const Overrides& knobs) {
  Experiment e;
  e.stage = stage;
  e.micro_batch = micro_batch;
  e.accumulation = std::max<int64_t>(1, per_replica / micro_batch);
  e.train_batch = e.micro_batch * e.accumulation * c.data_parallel;
  e.space = "z" + std::to_string(stage);
  e.name =
      e.space + "_gas" + std::to_string(e.accumulation) + "_tmbspg" + std::to_string(micro_batch);
  e.overrides = knobs;
  for (const auto& [path, value] : knobs) e.name += "_" + short_key(path) + name_value(value);
  e.overrides["zero_optimization.stage"] = stage;
  e.overrides["train_micro_batch_size_per_gpu"] = e.micro_batch;
  e.overrides["gradient_accumulation_steps"] = e.accumulation;
  e.overrides["train_batch_size"] = e.train_batch;
  // The run file's values that fill "auto" must agree with the explicit ones.
  if (!value_at_path(*c.user_config, "train.micro_batch_size").is_null())
    e.overrides["train.micro_batch_size"] = e.micro_batch;
  if (!value_at_path(*c.user_config, "train.gradient_accumulation_steps").is_null())
    e.overrides["train.gradient_accumulation_steps"] = e.accumulation;
  return e;
}

Experiment baseline_experiment(const SpaceContext& c) {
  Experiment e;
  e.name = "baseline";
  e.space = "baseline";
  const nlohmann::json stage = value_at_path(*c.user_config, "zero_optimization.stage");
  e.stage = static_cast<int>(as_integer(stage.is_array() ? stage.at(0) : stage).value_or(0));
  if (stage.is_array()) e.overrides["zero_optimization.stage"] = e.stage;
  const auto list = user_micro_batch_list(c);
  e.micro_batch = list ? list->front() : min_micro_batch(c);
  if (list) e.overrides["train_micro_batch_size_per_gpu"] = e.micro_batch;
  e.accumulation = user_accumulation(c);
  e.train_batch = e.micro_batch * e.accumulation * c.data_parallel;
  return e;
}

}  // namespace deepshard::autotune
