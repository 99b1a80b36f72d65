// The Llama's Hugging Face layout (LlamaForCausalLM.save_pretrained names:
// model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ..., model.norm.weight,
// lm_head.weight): the model's names and [out, in] weights are HF's, so tensors map one to one; a
// tied model reads no lm_head.weight (HF drops the tied copy when saving) and rotary inv_freq
// buffers (older files) are ignored.
#include "deepshard/checkpoint/hf_weights.h"

namespace deepshard::models {

checkpoint::HfLayout llama_hf_layout() {
  checkpoint::HfLayout layout;
  layout.ignored_suffixes = {".rotary_emb.inv_freq"};
  layout.optional_names = {"lm_head.weight"};
  layout.missing_hints = {{"lm_head.weight", " (a model saved with tie_word_embeddings?)"}};
  layout.unexpected_hint = " (the model has no such parameter: another n_layer or model.arch?)";
  return layout;
}

}  // namespace deepshard::models
