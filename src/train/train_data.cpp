// The data step of a training run: the training and validation token files and their samplers
// (over the data-parallel ranks: every tensor rank of a replica reads the same batches), each
// giving its windows through the model's training objective (CausalLmImpl::make_objective).
#include "train/training_run.h"

namespace deepshard::train {

void build_data(TrainingRun& run) {
  const auto& ds = run.ds;
  const auto& files = run.config.data;
  const int64_t vocab = run.config.model.vocab_size, block = run.config.model.block_size;
  const uint64_t seed = run.config.train.seed;
  TrainData& d = run.data;
  const data::DistributedSampler::Objective objective = [model = run.model](data::Batch& b) {
    model->make_objective(b.inputs, b.targets, b.sample_keys);
  };
  d.train_file = std::make_unique<data::TokenFile>(files.train, vocab);
  d.sampler = std::make_unique<data::DistributedSampler>(
      *d.train_file, block, ds.train_micro_batch_size_per_gpu, ds.gradient_accumulation_steps,
      run.dp_group().rank(), run.dp_group().size(), seed);
  d.sampler->set_objective(objective);
  if (files.valid.empty()) return;
  d.valid_file = std::make_unique<data::TokenFile>(files.valid, vocab);
  d.valid_sampler = std::make_unique<data::DistributedSampler>(
      *d.valid_file, block, ds.train_micro_batch_size_per_gpu, 1, run.dp_group().rank(),
      run.dp_group().size(), seed + 1);
  d.valid_sampler->set_objective(objective);
}

}  // namespace deepshard::train
