// The architecture-independent part of a language model (causal_lm.h): forward from the
// parts, the layers through the unit calls and the layer runner, loss, sampling, parameter count.
#include "deepshard/models/causal_lm.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <limits>
#include <unordered_set>

#include "deepshard/util/error.h"
#include "kernels/fused_ops.h"

namespace deepshard::models {

at::Tensor CausalLmImpl::forward(const at::Tensor& idx) {
  at::Tensor x = embed(idx);
  for (int64_t i = 0; i < num_layers(); ++i) x = run_layer(i, x);
  return head(x);
}

at::Tensor CausalLmImpl::run_layer(int64_t i, const at::Tensor& x) {
  return unit_calls_(size_t(i),
                     [&] { return layer_runner_ ? layer_runner_(i, x) : layer_forward(i, x); });
}

void CausalLmImpl::check_tokens(const at::Tensor& idx) const {
  DS_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong, Error, arch(),
           " forward: idx must be [B, T] int64, got ", idx.sizes(), " ", idx.scalar_type());
  DS_CHECK(idx.size(1) <= context_length(), Error, arch(), " forward: sequence length ",
           idx.size(1), " exceeds block_size ", context_length());
}

at::Tensor CausalLmImpl::loss(const at::Tensor& idx, const at::Tensor& targets) {
  DS_CHECK(targets.sizes() == idx.sizes(), Error, arch(), " loss: targets ", targets.sizes(),
           " do not match idx ", idx.sizes());
  at::Tensor x = embed(idx);
  for (int64_t i = 0; i < num_layers(); ++i) x = run_layer(i, x);
  return head_loss(x, targets);
}

at::Tensor CausalLmImpl::head_loss(const at::Tensor& hidden, const at::Tensor& targets) {
  if (predicts_every_position()) return loss_of_logits(head(hidden), targets);
  const at::Tensor flat_targets = targets.reshape({-1});
  const at::Tensor predicted = flat_targets.ne(-100).nonzero().squeeze(1);
  const at::Tensor rows = hidden.reshape({-1, hidden.size(-1)}).index_select(0, predicted);
  return loss_of_logits(head(rows), flat_targets.index_select(0, predicted));
}

at::Tensor CausalLmImpl::loss_of_logits(const at::Tensor& logits, const at::Tensor& targets) {
  const at::Tensor flat = logits.view({-1, logits.size(-1)});
  if (fused_loss()) return kernels::cross_entropy(flat, targets.reshape({-1}));
  return torch::nn::functional::cross_entropy(flat.to(at::kFloat), targets.reshape({-1}));
}

at::Tensor CausalLmImpl::classify(const at::Tensor& idx) {
  (void)idx;
  throw Error(
      detail::concat("model.arch \"", arch(), "\" has no classification head (bert has one)"));
}

at::Tensor CausalLmImpl::classification_loss(const at::Tensor& idx, const at::Tensor& labels) {
  DS_CHECK(labels.dim() == 1 && labels.size(0) == idx.size(0), Error, arch(),
           " classification: labels ", labels.sizes(), " do not match the ", idx.size(0),
           " sequences");
  const at::Tensor logits = classify(idx);
  const int64_t classes = logits.size(-1);
  DS_CHECK(labels.numel() == 0 ||
               (labels.min().item<int64_t>() >= 0 && labels.max().item<int64_t>() < classes),
           Error, arch(), " classification: a label is outside the head's ", classes, " classes");
  return torch::nn::functional::cross_entropy(logits.to(at::kFloat), labels);
}

std::vector<int64_t> CausalLmImpl::generate(const std::vector<int64_t>& prompt,
                                            int64_t max_new_tokens, double temperature,
                                            int64_t top_k, uint64_t seed) {
  DS_CHECK(generates_text(), Error, "model.arch \"", arch(),
           "\" does not generate text (it is not a left-to-right language model)");
  DS_CHECK(!prompt.empty(), Error, arch(),
           " generate: the prompt is empty (give at least one token)");
  for (int64_t token : prompt) {
    DS_CHECK(token >= 0 && token < vocab_size(), Error, arch(), " generate: prompt token ", token,
             " is outside the vocabulary [0, ", vocab_size(), ")");
  }
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  // Sampling runs on the host with a seeded CPU generator, so it is reproducible on any device.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto device = parameters().front().device();
  std::vector<int64_t> tokens = prompt;
  std::vector<int64_t> out;
  out.reserve(size_t(std::max<int64_t>(0, max_new_tokens)));
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const int64_t context = std::min<int64_t>(int64_t(tokens.size()), context_length());
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

int64_t CausalLmImpl::num_parameters() const {
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
