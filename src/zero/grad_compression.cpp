// Implementation of the engines' gradient compression glue (see grad_compression.h).
#include "zero/grad_compression.h"

#include <ATen/ATen.h>

#include <string>

#include "deepshard/checkpoint/safetensors.h"
#include "util/log.h"

namespace deepshard::zero {

std::unique_ptr<comm::PowerSgd> make_grad_compression(comm::Group& group,
                                                      const config::DsConfig& config,
                                                      const std::vector<FlatParamEntry>& entries,
                                                      int64_t padded_numel) {
  const config::CompressionConfig& c = config.compression;
  if (!c.enabled()) return nullptr;
  if (group.size() == 1) {
    if (group.rank() == 0)
      log::info("compression: one rank, nothing to all-reduce: PowerSGD is not used");
    return nullptr;
  }
  comm::PowerSgdOptions options;
  options.matrix_approximation_rank = c.matrix_approximation_rank;
  options.start_compressing_after_step = c.start_compressing_after_step;
  options.min_compression_rate = c.min_compression_rate;
  options.use_error_feedback = c.use_error_feedback;
  options.warm_start = c.warm_start;
  options.orthogonalization_epsilon = c.orthogonalization_epsilon;
  options.random_seed = c.random_seed;
  std::vector<comm::GradientTensor> tensors;
  for (const FlatParamEntry& e : entries) {
    const auto sizes = e.param.sizes();
    tensors.push_back({e.offset, std::vector<int64_t>(sizes.begin(), sizes.end())});
  }
  return std::make_unique<comm::PowerSgd>(group, options, std::move(tensors), padded_numel);
}

std::string compression_state_file(int rank) {
  return "compression_rank_" + std::to_string(rank) + ".safetensors";
}

void save_compression_state(const comm::PowerSgd& compressor, const std::string& tag_dir,
                            int rank) {
  checkpoint::save_safetensors(tag_dir + "/" + compression_state_file(rank), compressor.state(),
                               {{"format", "deepshard powersgd state"}});
}

void load_compression_state(comm::PowerSgd& compressor, const std::string& tag_dir, int rank,
                            int world, int saved_world) {
  const bool same_world = world == saved_world;
  auto content =
      checkpoint::load_safetensors(tag_dir + "/" + compression_state_file(same_world ? rank : 0));
  const auto error = content.tensors.find("error");
  if (!same_world || error == content.tensors.end() ||
      error->second.numel() != compressor.flat_numel()) {
    content.tensors["error"] = at::zeros({compressor.flat_numel()}, at::kFloat);
    if (rank == 0) {
      log::warn("compression: the checkpoint was saved by ", saved_world,
                " ranks with another gradient layout; PowerSGD's error-feedback residuals restart "
                "from zero at ",
                world, " ranks (its Q matrices are kept)");
    }
  }
  compressor.load_state(content.tensors);
}

}  // namespace deepshard::zero
