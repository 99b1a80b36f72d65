// The data step of a training run: the training and validation token files and their samplers
// (over the data-parallel ranks: every tensor rank of a replica reads the same batches), each
// giving its windows through the model's training objective (CausalLmImpl::make_objective), or
// with a classification task windows of the label files' passages and their classes.
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
  if (d.train_labels) {
    data::check_labels_match(*d.train_labels, *d.train_file, block);
    d.sampler->set_passages(d.train_labels.get());
  } else {
    d.sampler->set_objective(objective);
  }
  if (files.valid.empty()) return;
  d.valid_file = std::make_unique<data::TokenFile>(files.valid, vocab);
  d.valid_sampler = std::make_unique<data::DistributedSampler>(
      *d.valid_file, block, ds.train_micro_batch_size_per_gpu, 1, run.dp_group().rank(),
      run.dp_group().size(), seed + 1);
  if (d.valid_labels) {
    data::check_labels_match(*d.valid_labels, *d.valid_file, block);
    d.valid_sampler->set_passages(d.valid_labels.get());
  } else {
    d.valid_sampler->set_objective(objective);
  }
}

}  // namespace deepshard::train
