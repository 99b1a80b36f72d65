// The GPT's Hugging Face GPT-2 layout (GPT2LMHeadModel.save_pretrained names:
// transformer.wte.weight, transformer.h.{i}.attn.c_attn.weight, ...): the model's names under
// "transformer."; HF's Conv1D weights (c_attn, c_proj, c_fc) stored [in, out], the transpose of the
// torch Linear's [out, in]; the tied lm_head.weight is not written (as HF does) and ignored when
// read, as are the attention mask buffers (attn.bias, attn.masked_bias).
#include "deepshard/checkpoint/hf_weights.h"

namespace deepshard::models {

checkpoint::HfLayout gpt_hf_layout() {
  checkpoint::HfLayout layout;
  layout.prefix = "transformer.";
  layout.transposed_suffixes = {".c_attn.weight", ".c_proj.weight", ".c_fc.weight"};
  layout.ignored_suffixes = {".attn.bias", ".attn.masked_bias"};
  layout.optional_names = {"lm_head.weight"};
  layout.unexpected_hint = " (the model has no such parameter: another n_layer or bias setting?)";
  return layout;
}

}  // namespace deepshard::models
