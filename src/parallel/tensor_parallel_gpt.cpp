// TensorParallelGpt: the in-place sharding of a whole models::Gpt, its tensor-parallel forward
// (column-parallel QKV and MLP up projection behind f, row-parallel attention output and MLP down
// projection before g, the vocabulary-parallel embedding, head and cross-entropy) and the gather
// of the whole parameters.
#include "deepshard/parallel/tensor_parallel_gpt.h"

#include <torch/torch.h>

#include "deepshard/kernels/fused_ops.h"
#include "deepshard/models/attention.h"
#include "deepshard/parallel/tensor_ops.h"
#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

// How a parameter of models::Gpt is split, from its name.
enum class Split { kReplicated, kRows, kColumns, kQkvRows };

Split split_of(const std::string& name) {
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (name == "wte.weight") return Split::kRows;
  if (ends_with("attn.c_attn.weight") || ends_with("attn.c_attn.bias")) return Split::kQkvRows;
  if (ends_with("mlp.c_fc.weight") || ends_with("mlp.c_fc.bias")) return Split::kRows;
  if (ends_with("attn.c_proj.weight") || ends_with("mlp.c_proj.weight")) return Split::kColumns;
  return Split::kReplicated;
}

// Tensor rank t's slice of a whole parameter.
at::Tensor slice_of(const at::Tensor& whole, Split split, int t, int n) {
  switch (split) {
    case Split::kReplicated:
      return whole;
    case Split::kRows:
      return whole.chunk(n, 0)[t];
    case Split::kColumns:
      return whole.chunk(n, 1)[t];
    case Split::kQkvRows: {
      // [3C, ...] = q, k, v stacked: rank t takes its heads' rows of each.
      std::vector<at::Tensor> parts;
      for (const at::Tensor& third : whole.chunk(3, 0)) parts.push_back(third.chunk(n, 0)[t]);
      return at::cat(parts, 0);
    }
  }
  return whole;
}

// The whole parameter from the n slices (in tensor-rank order).
at::Tensor join_slices(const std::vector<at::Tensor>& slices, Split split) {
  switch (split) {
    case Split::kReplicated:
      return slices.front();
    case Split::kRows:
      return at::cat(slices, 0);
    case Split::kColumns:
      return at::cat(slices, 1);
    case Split::kQkvRows: {
      std::vector<at::Tensor> q, k, v;
      for (const at::Tensor& s : slices) {
        auto thirds = s.chunk(3, 0);
        q.push_back(thirds[0]);
        k.push_back(thirds[1]);
        v.push_back(thirds[2]);
      }
      return at::cat({at::cat(q, 0), at::cat(k, 0), at::cat(v, 0)}, 0);
    }
  }
  return slices.front();
}

// A LayerNorm module as models::Gpt applies it (the fused kernel when config.fused_kernels).
at::Tensor norm(torch::nn::LayerNorm& ln, const at::Tensor& x, bool fused) {
  return fused ? kernels::layer_norm(x, ln->weight, ln->bias, ln->options.eps()) : ln(x);
}

}  // namespace

TensorParallelGpt::TensorParallelGpt(models::Gpt model, comm::Group& tensor)
    : model_(std::move(model)), tensor_(tensor) {
  const auto& c = model_->config();
  const int n = tensor_.size(), t = tensor_.rank();
  DS_CHECK(c.n_head % n == 0, Error, "tensor_parallel.size ", n, ": model.n_head ", c.n_head,
           " is not divisible by it (heads are split over the tensor ranks)");
  DS_CHECK(c.vocab_size % n == 0, Error, "tensor_parallel.size ", n, ": model.vocab_size ",
           c.vocab_size, " is not divisible by it (the vocabulary is split over the tensor ranks)");
  DS_CHECK(c.dropout == 0.0, Error, "tensor_parallel.size ", n, ": model.dropout ", c.dropout,
           " is not supported yet with tensor parallelism (it needs the model-parallel RNG "
           "tracker); use 0");
  vocab_start_ = c.vocab_size / n * t;
  torch::NoGradGuard no_grad;
  for (auto& item : model_->named_parameters()) {
    const Split split = split_of(item.key());
    if (split == Split::kReplicated) continue;
    item.value().set_data(slice_of(item.value(), split, t, n).clone());
  }
  model_->set_block_runner([this](int64_t, models::Block& block, const at::Tensor& x) {
    return block_forward(block, x);
  });
}

bool TensorParallelGpt::is_split(const std::string& name) const {
  return split_of(name) != Split::kReplicated;
}

int TensorParallelGpt::split_dim(const std::string& name) const {
  switch (split_of(name)) {
    case Split::kReplicated:
      return -1;
    case Split::kColumns:
      return 1;
    default:
      return 0;
  }
}

int TensorParallelGpt::split_blocks(const std::string& name) const {
  return split_of(name) == Split::kQkvRows ? 3 : 1;
}

at::Tensor TensorParallelGpt::block_forward(models::Block& block, const at::Tensor& x) {
  const auto& c = model_->config();
  const int64_t local_heads = c.n_head / tensor_.size();
  auto& attn = *block->attn;
  auto& mlp = *block->mlp;
  // Attention: f, column-parallel QKV of this rank's heads, attention over them, row-parallel
  // output projection, g, then the (whole) bias.
  const bool fused = c.fused_kernels;
  const at::Tensor a = copy_to_tensor_region(norm(block->ln_1, x, fused), tensor_);
  auto qkv = torch::linear(a, attn.c_attn->weight, attn.c_attn->bias).chunk(3, 2);
  const at::Tensor y =
      models::causal_attention(qkv[0], qkv[1], qkv[2], local_heads, 0.0, false, fused);
  at::Tensor out = reduce_from_tensor_region(torch::linear(y, attn.c_proj->weight), tensor_);
  if (attn.c_proj->bias.defined()) out = out + attn.c_proj->bias;
  const at::Tensor h = x + out;
  // MLP: f, column-parallel up projection and GELU, row-parallel down projection, g, bias.
  const at::Tensor m = copy_to_tensor_region(norm(block->ln_2, h, fused), tensor_);
  const at::Tensor pre = torch::linear(m, mlp.c_fc->weight, mlp.c_fc->bias);
  const at::Tensor up = fused ? kernels::gelu_tanh(pre) : torch::gelu(pre, "tanh");
  at::Tensor down = reduce_from_tensor_region(torch::linear(up, mlp.c_proj->weight), tensor_);
  if (mlp.c_proj->bias.defined()) down = down + mlp.c_proj->bias;
  return h + down;
}

at::Tensor TensorParallelGpt::loss(const at::Tensor& idx, const at::Tensor& targets) {
  const auto& c = model_->config();
  DS_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong && targets.sizes() == idx.sizes(),
           Error, "tensor-parallel GPT loss: idx and targets must be [B, T] int64, got ",
           idx.sizes(), " and ", targets.sizes());
  DS_CHECK(idx.size(1) <= c.block_size, Error, "tensor-parallel GPT loss: sequence length ",
           idx.size(1), " exceeds block_size ", c.block_size);
  auto& gpt = *model_;
  const at::Tensor pos = torch::arange(idx.size(1), idx.options());
  at::Tensor x =
      vocab_parallel_embedding(idx, gpt.wte->weight, vocab_start_, tensor_) + gpt.wpe(pos);
  for (size_t i = 0; i < gpt.blocks.size(); ++i) {
    x = gpt.unit_calls()(i, [&] { return block_forward(gpt.blocks[i], x); });
  }
  // The head is tied to this rank's vocabulary rows: logits [B, T, V/T], never gathered.
  const at::Tensor logits = torch::linear(
      copy_to_tensor_region(norm(gpt.ln_f, x, c.fused_kernels), tensor_), gpt.wte->weight);
  return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                      vocab_start_, tensor_);
}

std::vector<std::pair<std::string, at::Tensor>> TensorParallelGpt::gather_full_parameters() {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<std::string, at::Tensor>> out;
  const int n = tensor_.size();
  for (auto& item : model_->named_parameters()) {
    const Split split = split_of(item.key());
    at::Tensor local = item.value().detach().contiguous();
    if (split == Split::kReplicated || n == 1) {
      out.emplace_back(item.key(), local.clone());
      continue;
    }
    at::Tensor all = at::empty({local.numel() * n}, local.options());
    tensor_.all_gather(all, local.view({-1}));
    std::vector<at::Tensor> slices;
    for (const at::Tensor& s : all.chunk(n, 0)) slices.push_back(s.view(local.sizes()));
    out.emplace_back(item.key(), join_slices(slices, split));
  }
  return out;
}

}  // namespace deepshard::parallel
