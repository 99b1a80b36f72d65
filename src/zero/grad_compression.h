// Gradient compression from the DeepSpeed config's `compression` block: a PowerSGD compressor
// (comm/powersgd.h) over an engine's flat gradient buffer, one gradient matrix per parameter, and
// its per-rank checkpoint file (the error-feedback residual is each rank's own; Q is replicated).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/powersgd.h"
#include "deepshard/config/ds_config.h"
#include "zero/flat_params.h"

namespace deepshard::zero {

// nullptr when the config asks for no compression, or with one rank (nothing is all-reduced).
// `padded_numel`: the flat gradient buffer's size.
std::unique_ptr<comm::PowerSgd> make_grad_compression(comm::Group& group,
                                                      const config::DsConfig& config,
                                                      const std::vector<FlatParamEntry>& entries,
                                                      int64_t padded_numel);

// The file of `rank` inside a checkpoint tag directory.
std::string compression_state_file(int rank);

// Writes `compressor`'s state to <tag_dir>/compression_state_file(rank).
void save_compression_state(const comm::PowerSgd& compressor, const std::string& tag_dir, int rank);

// Restores the state saved by `saved_world` ranks into `compressor` (this run: `world` ranks).
// Same world size and gradient layout: this rank's file, exactly. Otherwise: the replicated Q from
// rank 0's file, and the error-feedback residuals start from zero (they belong to the old ranks'
// layout), with a warning.
void load_compression_state(comm::PowerSgd& compressor, const std::string& tag_dir, int rank,
                            int world, int saved_world);

}  // namespace deepshard::zero
