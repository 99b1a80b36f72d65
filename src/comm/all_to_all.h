// The all-to-all collective of a group made by create_group / create_subgroup (DeepSpeed's
// all_to_all_single with even splits): `in` and `out` hold size() equal slices; slice r of `in`
// goes to rank r, and slice r of `out` receives rank r's slice for this rank. Any dtype the group
// moves (int8 included: ZeRO++'s quantized gradients); both contiguous, the same dtype and numel,
// a multiple of size(). Recorded in the group's comm log as "all_to_all" with in's bytes (what
// this rank hands the collective), under the group's link class. Not on a group whose transport
// is hierarchical (spanning hosts with several ranks on each): CommError.
#pragma once

#include <ATen/core/Tensor.h>

#include "deepshard/comm/group.h"

namespace deepshard::comm {

Work all_to_all_async(Group& group, const at::Tensor& out, const at::Tensor& in);

inline void all_to_all(Group& group, const at::Tensor& out, const at::Tensor& in) {
  all_to_all_async(group, out, in).wait();
}

}  // namespace deepshard::comm
