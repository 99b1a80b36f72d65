// The Llama's tensor-parallel plan (Megatron-LM's layout; llama.h): q_proj, k_proj, v_proj
// column-parallel (query heads [t H/T, (t+1) H/T) and exactly the key/value heads they read),
// o_proj row-parallel; gate_proj and up_proj column-parallel, down_proj row-parallel;
// model.embed_tokens and the untied lm_head vocabulary-parallel. The RMSNorms are replicated.
#include "deepshard/models/llama.h"

namespace deepshard::models {

sharding::TensorPlan llama_tensor_plan() {
  sharding::TensorPlan plan;
  plan.column("self_attn.q_proj").column("self_attn.k_proj").column("self_attn.v_proj");
  plan.row("self_attn.o_proj");
  plan.column("mlp.gate_proj").column("mlp.up_proj").row("mlp.down_proj");
  plan.vocab("model.embed_tokens.weight").vocab("lm_head.weight");
  return plan;
}

}  // namespace deepshard::models
