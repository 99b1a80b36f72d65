// The BERT's parameter count, names and shapes from its config (bert.h, parameter_shapes.h), in
// the model's named_parameters() order.
#include "deepshard/models/bert.h"

namespace deepshard::models {

std::vector<NamedShape> bert_parameter_shapes(const BertConfig& c) {
  const int64_t C = c.n_embd, I = c.intermediate_size;
  std::vector<NamedShape> out;
  int64_t item = NamedShape::kEmbedding;  // the pipeline item of the next parameters
  auto linear = [&](const std::string& name, int64_t in, int64_t features) {
    out.push_back({name + ".weight", {features, in}, item});
    out.push_back({name + ".bias", {features}, item});
  };
  auto layer_norm = [&](const std::string& name) {
    out.push_back({name + ".weight", {C}, item});
    out.push_back({name + ".bias", {C}, item});
  };
  const std::string e = "bert.embeddings.";
  out.push_back({e + "word_embeddings.weight", {c.vocab_size, C}, item});
  out.push_back({e + "position_embeddings.weight", {c.block_size, C}, item});
  out.push_back({e + "token_type_embeddings.weight", {c.type_vocab_size, C}, item});
  layer_norm(e + "LayerNorm");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    item = i;
    const std::string l = "bert.encoder.layer." + std::to_string(i) + ".";
    linear(l + "attention.self.query", C, C);
    linear(l + "attention.self.key", C, C);
    linear(l + "attention.self.value", C, C);
    linear(l + "attention.output.dense", C, C);
    layer_norm(l + "attention.output.LayerNorm");
    linear(l + "intermediate.dense", C, I);
    linear(l + "output.dense", I, C);
    layer_norm(l + "output.LayerNorm");
  }
  item = NamedShape::kHead;
  if (c.num_labels > 0) linear("bert.pooler.dense", C, C);
  out.push_back({"cls.predictions.bias", {c.vocab_size}, item});  // its own before its children's
  linear("cls.predictions.transform.dense", C, C);
  layer_norm("cls.predictions.transform.LayerNorm");
  if (c.num_labels > 0) linear("classifier", C, c.num_labels);
  return out;
}

int64_t bert_parameter_count(const BertConfig& config) {
  int64_t total = 0;
  for (const NamedShape& s : bert_parameter_shapes(config)) total += s.numel();
  return total;
}

}  // namespace deepshard::models
