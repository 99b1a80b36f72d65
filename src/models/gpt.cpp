// The GPT-2 model: embeddings, the block stack (through the engine's block runner when one is
// installed), the final LayerNorm and the head tied to wte; loss and sampling.
#include "deepshard/models/gpt.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <limits>
#include <unordered_set>

#include "deepshard/kernels/fused_ops.h"
#include "deepshard/util/error.h"
#include "models/gpt_init.h"
#include "models/layer_norm_call.h"

namespace deepshard::models {

GptImpl::GptImpl(const GptConfig& config, uint64_t seed, const BlockBuilt& on_block_built)
    : config_(config) {
  DS_CHECK(
      config.n_layer > 0 && config.n_embd > 0 && config.block_size > 0 && config.vocab_size > 0,
      Error, "GPT config: n_layer, n_embd, block_size and vocab_size must be positive (got ",
      config.n_layer, ", ", config.n_embd, ", ", config.block_size, ", ", config.vocab_size, ")");
  DS_CHECK(config.dropout >= 0.0 && config.dropout < 1.0, Error, "GPT config: dropout ",
           config.dropout, " is outside [0, 1)");
  // Registration order is Hugging Face's: wte, wpe, h.0 ... h.{n-1}, ln_f; each part is
  // initialised as it is built, in that order (the draws of init_gpt2_weights on the whole model).
  Gpt2Init init(config.n_layer, seed);
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  init.init(*wte, "wte");
  wpe = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  init.init(*wpe, "wpe");
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks.emplace_back(config);
    h->push_back(blocks.back());
    init.init(*blocks.back(), "h." + std::to_string(i));
    if (on_block_built) on_block_built(size_t(i), *blocks.back());
  }
  ln_f = register_module(
      "ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd}).eps(1e-5)));
  init.init(*ln_f, "ln_f");
}

at::Tensor GptImpl::forward(const at::Tensor& idx) {
  DS_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong, Error,
           "GPT forward: idx must be [B, T] int64, got ", idx.sizes(), " ", idx.scalar_type());
  const int64_t seq = idx.size(1);
  DS_CHECK(seq <= config_.block_size, Error, "GPT forward: sequence length ", seq,
           " exceeds block_size ", config_.block_size);
  const at::Tensor pos = torch::arange(seq, idx.options());
  at::Tensor x = torch::dropout(wte(idx) + wpe(pos), config_.dropout, is_training());
  for (int64_t i = 0; i < int64_t(blocks.size()); ++i) {
    x = unit_calls_(size_t(i), [&] {
      return block_runner_ ? block_runner_(i, blocks[i], x) : blocks[i]->forward(x);
    });
  }
  // The head reuses wte's weight ([vocab, C]): logits = ln_f(x) wte^T.
  return torch::linear(apply_layer_norm(ln_f, x, config_.fused_kernels), wte->weight);
}

sharding::ShardingPlan GptImpl::sharding_plan() {
  sharding::ShardingPlan plan(unit_calls_);
  for (size_t i = 0; i < blocks.size(); ++i) plan.unit("h." + std::to_string(i), blocks[i].ptr());
  plan.tie("wte.weight", "the output head (logits = ln_f(x) wte^T)");
  return plan;
}

at::Tensor GptImpl::loss(const at::Tensor& idx, const at::Tensor& targets) {
  DS_CHECK(targets.sizes() == idx.sizes(), Error, "GPT loss: targets ", targets.sizes(),
           " do not match idx ", idx.sizes());
  const at::Tensor logits = forward(idx);
  // Cross-entropy in fp32 whatever the parameter dtype (a bf16 log-softmax over the vocabulary
  // loses too much precision); the fused kernel reads bf16 logits without an fp32 copy.
  const at::Tensor flat = logits.view({-1, logits.size(-1)});
  if (config_.fused_kernels) return kernels::cross_entropy(flat, targets.reshape({-1}));
  return torch::nn::functional::cross_entropy(flat.to(at::kFloat), targets.reshape({-1}));
}

std::vector<int64_t> GptImpl::generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                       double temperature, int64_t top_k, uint64_t seed) {
  DS_CHECK(!prompt.empty(), Error, "GPT generate: the prompt is empty (give at least one token)");
  for (int64_t token : prompt) {
    DS_CHECK(token >= 0 && token < config_.vocab_size, Error, "GPT generate: prompt token ", token,
             " is outside the vocabulary [0, ", config_.vocab_size, ")");
  }
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  // Sampling runs on the host with a seeded CPU generator, so it is reproducible on any device.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto device = wte->weight.device();
  std::vector<int64_t> tokens = prompt;
  std::vector<int64_t> out;
  out.reserve(size_t(std::max<int64_t>(0, max_new_tokens)));
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const int64_t context = std::min<int64_t>(int64_t(tokens.size()), config_.block_size);
    const at::Tensor idx =
        torch::tensor(std::vector<int64_t>(tokens.end() - context, tokens.end()), at::kLong)
            .to(device)
            .view({1, context});
    at::Tensor logits = forward(idx).select(1, context - 1).squeeze(0).to(at::kCPU, at::kFloat);
    int64_t next;
    if (temperature <= 0.0) {
      next = logits.argmax().item<int64_t>();  // greedy
    } else {
      logits = logits / temperature;
      if (top_k > 0 && top_k < logits.size(0)) {
        const at::Tensor kth = std::get<0>(logits.topk(top_k)).min();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, 0), 1, false, gen).item<int64_t>();
    }
    tokens.push_back(next);
    out.push_back(next);
  }
  train(was_training);
  return out;
}

int64_t GptImpl::num_parameters() const {
  // Distinct parameter tensors (by TensorImpl, which stays unique even when a sharding engine has
  // freed a parameter's storage): a tied weight counts once.
  std::unordered_set<const c10::TensorImpl*> seen;
  int64_t total = 0;
  for (const at::Tensor& p : parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) total += p.numel();
  }
  return total;
}

}  // namespace deepshard::models
