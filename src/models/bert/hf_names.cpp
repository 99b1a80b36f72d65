// The BERT's Hugging Face layout (BertForMaskedLM.save_pretrained names: bert.embeddings.*,
// bert.encoder.layer.{i}.*, cls.predictions.*): the model's names and [out, in] weights are HF's,
// so tensors map one to one. Read only when the model has them: the tied decoder's copies
// (cls.predictions.decoder.weight, .decoder.bias, which HF may write) and the pooler of
// BertForPreTraining files; ignored: the position_ids buffer and the next-sentence head. The
// classification head (pooler and classifier) keeps its initialisation when a file (a masked-LM
// one) lacks it: fine-tuning from a pretrained encoder.
#include "deepshard/checkpoint/hf_weights.h"

namespace deepshard::models {

checkpoint::HfLayout bert_hf_layout() {
  checkpoint::HfLayout layout;
  layout.ignored_suffixes = {".position_ids", "cls.seq_relationship.weight",
                             "cls.seq_relationship.bias"};
  layout.optional_names = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
                           "bert.pooler.dense.weight", "bert.pooler.dense.bias"};
  layout.fresh_if_missing = {"bert.pooler.dense.weight", "bert.pooler.dense.bias",
                             "classifier.weight", "classifier.bias"};
  layout.unexpected_hint =
      " (the model has no such parameter: another n_layer, num_labels or model.arch?)";
  return layout;
}

}  // namespace deepshard::models
