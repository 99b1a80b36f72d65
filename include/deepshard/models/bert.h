// A BERT-style encoder (Devlin et al. 2019; Hugging Face's BertForMaskedLM and
// BertForSequenceClassification): word, learned position and token-type embeddings summed and
// layer-normed; post-LayerNorm encoder layers with bidirectional (unmasked) multi-head attention
// and an erf-GELU MLP; a masked-LM head (dense, GELU, LayerNorm, then the decoder tied to the word
// embeddings plus its own bias); optionally the pooled classification head (BertPooler: dense and
// tanh over the first token, then a classifier). Parameter names are Hugging Face's
// (bert.embeddings.*, bert.encoder.layer.{i}.attention.self.query, ..., cls.predictions.*,
// bert.pooler.dense, classifier) in torch's [out, in] layout, so an HF BERT safetensors file maps
// one to one.
// Its training objective on the token files is masked-LM (make_objective): in every sample of
// block_size tokens, round(0.15 block_size) positions (at least 1) are chosen, each replaced by the
// mask token (80%), a random token (10%) or kept (10%), drawn from the sample's key (a function of
// train.seed, the step and the sample's index in the global batch: every layout masks alike); the
// loss is the mean cross-entropy over the chosen positions.
// Sharding (deepshard/sharding/sharding_plan.h): one unit per encoder layer; the root holds the
// embeddings and the heads; the word embeddings are tied to the masked-LM decoder.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/models/causal_lm.h"
#include "deepshard/models/flops.h"
#include "deepshard/models/parameter_shapes.h"
#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::config {
struct ModelConfig;
}

namespace deepshard::models {

struct BertConfig {
  int64_t n_layer = 2;              // HF num_hidden_layers
  int64_t n_head = 2;               // num_attention_heads
  int64_t n_embd = 64;              // hidden_size
  int64_t intermediate_size = 256;  // the MLP's width (HF: 4 hidden_size)
  int64_t block_size = 64;          // max_position_embeddings: the longest sequence
  // The vocabulary, the mask token included: its last id (vocab_size - 1) is [MASK]. With the
  // byte vocabulary (256) that is 0xFF, a byte UTF-8 text never contains.
  int64_t vocab_size = 256;
  int64_t type_vocab_size = 2;  // token-type (segment) embeddings; inputs are all type 0
  double layer_norm_eps = 1e-12;
  double dropout = 0.0;  // HF hidden_dropout_prob and attention_probs_dropout_prob
  // > 0: the pooler and a classifier of num_labels classes (classify(), classification_loss()).
  int64_t num_labels = 0;
  // The pooler's input: false, the first position's hidden state (HF's BertPooler); true, the mean
  // over the positions (model.pooling "mean"). Parameters and names are the same either way.
  bool mean_pooling = false;
  double mask_probability = 0.15;  // the share of each sample's positions the objective predicts
  // oneDNN's sgemm for the fp32 Linear layers (kernels/linear.h); false: libtorch's.
  bool fused_kernels = true;

  int64_t mask_token_id() const { return vocab_size - 1; }
  // Masked positions per sample of `seq` tokens: round(mask_probability seq), at least 1.
  int64_t masked_per_sample(int64_t seq) const;
};

// The BERT's sizes from a run's model section (presets applied).
BertConfig bert_config(const config::ModelConfig& model);

// Parameters of a BERT with `config` (the tied decoder counted once), its names and shapes in
// named_parameters() order, and its matmul FLOPs per token:
//   forward = L · (8·C² + 4·C·I + 4·T·C) + p · (2·C² + 2·C·V)   (q, k, v, output 2C² each; the
//             MLP 2CI twice; QK^T and AV 2TC each; the head's transform 2C² and decoder 2CV at
//             the share p = masked_per_sample(T) / T of the positions the loss predicts)
int64_t bert_parameter_count(const BertConfig& config);
std::vector<NamedShape> bert_parameter_shapes(const BertConfig& config);
FlopsPerToken bert_flops_per_token(const BertConfig& config, int64_t seq_len = 0);

// The masked-LM objective on `inputs` [B, T] (token ids, none equal to the mask token) with one
// key per sample `keys` [B] int64: the masked inputs and the labels (the original token at each
// chosen position, -100 elsewhere). Throws Error naming the mask token if an input holds it.
struct MaskedBatch {
  at::Tensor inputs, labels;
};
MaskedBatch mask_tokens(const BertConfig& config, const at::Tensor& inputs, const at::Tensor& keys);

class BertSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit BertSelfAttentionImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> context [B, T, C], unmasked
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};

 private:
  int64_t n_head_;
  double dropout_;
  bool fused_;
};
TORCH_MODULE(BertSelfAttention);

// dense, then LayerNorm(dropout(dense(x)) + residual): BertSelfOutput and BertOutput.
class BertResidualOutputImpl : public torch::nn::Module {
 public:
  BertResidualOutputImpl(int64_t in, const BertConfig& config);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& residual);
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // HF's name

 private:
  double dropout_;
  bool fused_;
};
TORCH_MODULE(BertResidualOutput);

class BertAttentionImpl : public torch::nn::Module {
 public:
  explicit BertAttentionImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& x);
  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertAttention);

// gelu(dense(x)), GELU in its erf form: HF's BertIntermediate.
class BertIntermediateImpl : public torch::nn::Module {
 public:
  BertIntermediateImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear dense{nullptr};

 private:
  bool fused_;
};
TORCH_MODULE(BertIntermediate);

class BertLayerImpl : public torch::nn::Module {
 public:
  explicit BertLayerImpl(const BertConfig& config);
  // forward_region through activation::checkpoint (recomputed when checkpointing is active).
  at::Tensor forward(const at::Tensor& x);
  at::Tensor forward_region(const at::Tensor& x);
  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertLayer);

class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& idx);  // [B, T] -> [B, T, C]
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr},
      token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};

 private:
  bool fused_;
  double dropout_;
};
TORCH_MODULE(BertEmbeddings);

class BertEncoderImpl : public torch::nn::Module {
 public:
  torch::nn::ModuleList layer{nullptr};
  std::vector<BertLayer> layers;  // the same modules as layer, typed
};
TORCH_MODULE(BertEncoder);

// tanh(dense(hidden of the first token)): HF's BertPooler; with BertConfig::mean_pooling, of the
// positions' mean hidden state.
class BertPoolerImpl : public torch::nn::Module {
 public:
  explicit BertPoolerImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& hidden);  // [B, T, C] -> [B, C]
  torch::nn::Linear dense{nullptr};

 private:
  bool fused_;
  bool mean_;
};
TORCH_MODULE(BertPooler);

// HF's "bert" (BertModel): embeddings, encoder.layer.{i}, and the pooler when the model
// classifies (num_labels > 0).
class BertBodyImpl : public torch::nn::Module {
 public:
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};
};
TORCH_MODULE(BertBody);

// HF's cls.predictions.transform: LayerNorm(gelu(dense(x))).
class BertHeadTransformImpl : public torch::nn::Module {
 public:
  explicit BertHeadTransformImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};

 private:
  bool fused_;
};
TORCH_MODULE(BertHeadTransform);

// HF's cls.predictions: the transform and the decoder's bias [V] (the decoder's weight is the
// word embeddings').
class BertLmPredictionImpl : public torch::nn::Module {
 public:
  explicit BertLmPredictionImpl(const BertConfig& config);
  BertHeadTransform transform{nullptr};
  at::Tensor bias;
};
TORCH_MODULE(BertLmPrediction);

// HF's cls (BertOnlyMLMHead).
class BertClsImpl : public torch::nn::Module {
 public:
  BertLmPrediction predictions{nullptr};
};
TORCH_MODULE(BertCls);

class BertImpl : public CausalLmImpl {
 public:
  // `on_layer_built` (optional) gets each encoder layer as soon as it is built and initialised,
  // before the next one exists (zero::PartitionedBuild partitions it there).
  BertImpl(const BertConfig& config, uint64_t seed,
           const sharding::UnitBuilt& on_layer_built = nullptr);

  // forward (causal_lm.h) = head(layers(embed(idx))): the embeddings; the encoder layers; the
  // masked-LM head (logits at every position).
  at::Tensor embed(const at::Tensor& idx) override;
  at::Tensor head(const at::Tensor& hidden) override;
  int64_t num_layers() const override { return config_.n_layer; }
  int64_t hidden_size() const override { return config_.n_embd; }
  std::vector<std::string> embedding_parameters() const override;
  int64_t context_length() const override { return config_.block_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  std::string arch() const override { return "bert"; }
  bool generates_text() const override { return false; }

  // Masked-LM (mask_tokens) with the sampler's sample keys; the targets become the labels.
  void make_objective(at::Tensor& inputs, at::Tensor& targets,
                      const at::Tensor& sample_keys) const override;

  // The classification head (num_labels > 0): logits [B, num_labels] of idx [B, T] from the
  // pooled first token (HF's BertForSequenceClassification; model.pooling "mean": the positions'
  // mean); classification_loss (causal_lm.h)
  // is their mean cross-entropy against labels [B].
  at::Tensor classify(const at::Tensor& idx) override;
  int64_t num_labels() const override { return config_.num_labels; }

  // Unit i is bert.encoder.layer.i; bert.embeddings.word_embeddings.weight is tied to the
  // masked-LM decoder; no tensor-parallel split.
  sharding::ShardingPlan sharding_plan() override;

  const BertConfig& config() const { return config_; }

  BertBody bert{nullptr};
  BertCls cls{nullptr};
  torch::nn::Linear classifier{nullptr};  // num_labels > 0 only (with bert.pooler)

 protected:
  at::Tensor layer_forward(int64_t i, const at::Tensor& x) override;
  // The masked-LM loss runs the decoder on the masked positions only (head_loss).
  bool predicts_every_position() const override { return false; }

 private:
  BertConfig config_;
};
TORCH_MODULE(Bert);

}  // namespace deepshard::models
