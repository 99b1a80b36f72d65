// GPT-2 initialisation (see gpt_init.h): which law each parameter follows, and the seeded draw.
#include "models/gpt/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "deepshard/util/error.h"

namespace deepshard::models {
namespace {

constexpr double kInitStd = 0.02;

enum class Law { kNormal, kZeros, kOnes };

struct ParamInit {
  Law law;
  double std = 0.0;
};

// The law for parameter `leaf` ("weight" or "bias") of module `owner` named `module_name`.
ParamInit law_for(const torch::nn::Module& owner, const std::string& module_name,
                  const std::string& leaf, int64_t n_layer, const std::string& full_name) {
  const bool is_weight = leaf == "weight";
  const bool is_bias = leaf == "bias";
  if (owner.as<torch::nn::Linear>() != nullptr) {
    if (is_bias) return {Law::kZeros};
    const bool residual_proj = module_name == "c_proj" || module_name.ends_with(".c_proj");
    if (is_weight) {
      return {Law::kNormal, residual_proj ? kInitStd / std::sqrt(2.0 * double(n_layer)) : kInitStd};
    }
  }
  if (owner.as<torch::nn::Embedding>() != nullptr && is_weight) return {Law::kNormal, kInitStd};
  if (owner.as<torch::nn::LayerNorm>() != nullptr) {
    if (is_weight) return {Law::kOnes};
    if (is_bias) return {Law::kZeros};
  }
  throw Error(detail::concat("GPT init: no initialisation rule for parameter ", full_name));
}

}  // namespace

Gpt2Init::Gpt2Init(int64_t n_layer, uint64_t seed)
    : n_layer_(n_layer), gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void Gpt2Init::init(torch::nn::Module& module, const std::string& prefix) {
  // The module itself is "" (named_modules cannot include it while it is being constructed).
  std::map<std::string, const torch::nn::Module*> modules = {{"", &module}};
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    modules.emplace(item.key(), item.value().get());
  }
  torch::NoGradGuard no_grad;
  for (const auto& item : module.named_parameters()) {
    const std::string& name = item.key();
    const size_t dot = name.rfind('.');
    const std::string module_name = dot == std::string::npos ? "" : name.substr(0, dot);
    const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    const auto owner = modules.find(module_name);
    DS_ASSERT(owner != modules.end(), "no module owns parameter ", name);
    const std::string full_name = prefix.empty() ? name : prefix + "." + name;
    const std::string full_module = prefix.empty()        ? module_name
                                    : module_name.empty() ? prefix
                                                          : prefix + "." + module_name;
    const ParamInit init = law_for(*owner->second, full_module, leaf, n_layer_, full_name);
    at::Tensor param = item.value();
    switch (init.law) {
      case Law::kZeros:
        param.zero_();
        break;
      case Law::kOnes:
        param.fill_(1.0);
        break;
      case Law::kNormal: {
        // Drawn on the host in fp32 from the seeded CPU generator, so the values do not depend on
        // the parameter's device or dtype.
        at::Tensor values = at::empty(param.sizes(), at::TensorOptions().dtype(at::kFloat));
        values.normal_(0.0, init.std, gen_);
        param.copy_(values);
        break;
      }
    }
  }
}

void init_gpt2_weights(torch::nn::Module& model, int64_t n_layer, uint64_t seed) {
  Gpt2Init(n_layer, seed).init(model, "");
}

}  // namespace deepshard::models
