// The GPT's tensor-parallel plan (Megatron-LM's layout; gpt.h): attn.c_attn column-parallel with
// q, k and v stacked (each third's rows split: the heads [t H/T, (t+1) H/T) of each), mlp.c_fc
// column-parallel, attn.c_proj and mlp.c_proj row-parallel (their biases whole), wte
// vocabulary-parallel (tied to the head). LayerNorms and wpe are replicated.
#include "deepshard/models/gpt.h"

namespace deepshard::models {

sharding::TensorPlan gpt_tensor_plan() {
  sharding::TensorPlan plan;
  plan.fused_qkv_column("attn.c_attn").row("attn.c_proj");
  plan.column("mlp.c_fc").row("mlp.c_proj");
  plan.vocab("wte.weight");
  return plan;
}

}  // namespace deepshard::models
