// The first step of a training run: what must hold before anything is built.
#include <torch/torch.h>

#include <filesystem>

#include "deepshard/util/error.h"
#include "parallel/process_groups.h"
#include "train/training_run.h"

namespace deepshard::train {

void setup(TrainingRun& run) {
  DS_CHECK(!run.config.data.train.empty(), ConfigError, "data.train: no training token file given");
  std::filesystem::create_directories(run.config.train.run_dir);
  // Each rank its own dropout stream, except that the tensor ranks of a replica share one (that of
  // their tensor rank 0): they apply the one dropout mask of the single-rank run to their
  // replicated activations and their parts of it to the split attention weights
  // (models::TensorParallelModel). Without tensor parallelism every rank is its own tensor rank 0.
  const parallel::RankGrid grid = parallel::grid_from_config(run.config.parallel, run.group.size());
  parallel::GridCoord stream = grid.coord(run.group.rank());
  stream.tensor = 0;
  torch::manual_seed(run.config.train.seed + static_cast<uint64_t>(grid.rank(stream)));
}

double mean_over_ranks(comm::Group& group, double value) {
  auto t = torch::full({1}, value, torch::kDouble);
  group.all_reduce(t, comm::ReduceOp::kAvg);
  return t.item<double>();
}

std::vector<int64_t> gather_over_ranks(comm::Group& group, int64_t value) {
  auto all = torch::zeros({group.size()}, torch::kLong);
  group.all_gather(all, torch::full({1}, value, torch::kLong));
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

}  // namespace deepshard::train
