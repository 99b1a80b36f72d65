// The classification task of a training run (task.type "classification", config::TaskConfig):
// its label files and the model's number of classes before the model is built, and the
// evaluation over every validation passage (accuracy, loss, the majority-class baseline).
#include <torch/torch.h>

#include <algorithm>

#include "deepshard/util/error.h"
#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {
namespace {

// The class most passages of `labels` have (the lowest index on a tie).
int64_t majority_class(const data::LabelFile& labels) {
  std::vector<int64_t> counts(labels.classes.size(), 0);
  for (const data::Passage& p : labels.passages) ++counts[size_t(p.label)];
  return std::max_element(counts.begin(), counts.end()) - counts.begin();
}

}  // namespace

void prepare_task(TrainingRun& run) {
  config::TaskConfig& task = run.config.task;
  if (!task.classification()) return;
  if (task.train_labels.empty()) task.train_labels = data::label_path_for(run.config.data.train);
  if (task.valid_labels.empty() && !run.config.data.valid.empty())
    task.valid_labels = data::label_path_for(run.config.data.valid);
  run.data.train_labels =
      std::make_unique<data::LabelFile>(data::read_label_file(task.train_labels));
  if (!task.valid_labels.empty()) {
    run.data.valid_labels =
        std::make_unique<data::LabelFile>(data::read_label_file(task.valid_labels));
    DS_CHECK(run.data.valid_labels->classes == run.data.train_labels->classes, IoError,
             task.valid_labels, ": its classes line differs from that of ", task.train_labels,
             " (label files of different tasks?)");
  }
  run.config.model.num_labels = static_cast<int64_t>(run.data.train_labels->classes.size());
  if (run.rank0) {
    log::info(
        "task: classification into ", run.config.model.num_labels, " classes, ",
        run.data.train_labels->passages.size(), " training passages (", task.train_labels, ")",
        run.data.valid_labels ? ", " + std::to_string(run.data.valid_labels->passages.size()) +
                                    " validation passages (" + task.valid_labels + ")"
                              : std::string());
  }
}

ClassificationScore evaluate_classification(TrainingRun& run) {
  const data::LabelFile& labels = *run.data.valid_labels;
  const data::TokenFile& file = *run.data.valid_file;
  const int64_t block = run.config.model.block_size;
  const int64_t micro = run.ds.train_micro_batch_size_per_gpu;
  const auto total = static_cast<int64_t>(labels.passages.size());
  comm::Group& dp = run.dp_group();
  const int64_t world = dp.size(), rank = dp.rank();
  // Slot j of this rank is passage j * world + rank. Every rank runs the same number of batches
  // (stage 3 gathers collectively in each forward): slots past the end repeat passage 0 and are
  // not counted.
  const int64_t slots = (total + world - 1) / world;
  const int64_t batches = (slots + micro - 1) / micro;
  torch::NoGradGuard no_grad;
  run.model->eval();
  double loss_sum = 0.0, correct = 0.0, counted = 0.0;
  for (int64_t b = 0; b < batches; ++b) {
    at::Tensor inputs = at::empty({micro, block}, at::kLong);
    at::Tensor targets = at::empty({micro}, at::kLong);
    at::Tensor weight = at::zeros({micro}, at::kDouble);
    for (int64_t p = 0; p < micro; ++p) {
      const int64_t index = (b * micro + p) * world + rank;
      const bool real = b * micro + p < slots && index < total;
      const data::Passage& passage = labels.passages[size_t(real ? index : 0)];
      file.read(passage.start, block, inputs.data_ptr<int64_t>() + p * block);
      targets.data_ptr<int64_t>()[p] = passage.label;
      weight.data_ptr<double>()[p] = real ? 1.0 : 0.0;
    }
    const at::Tensor logits = run.model->classify(inputs).to(at::kFloat);
    const at::Tensor losses =
        torch::nn::functional::cross_entropy(
            logits, targets,
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
            .to(at::kDouble);
    const at::Tensor right = logits.argmax(-1).eq(targets).to(at::kDouble);
    loss_sum += (losses * weight).sum().item<double>();
    correct += (right * weight).sum().item<double>();
    counted += weight.sum().item<double>();
  }
  run.model->train();
  auto sums = torch::tensor({loss_sum, correct, counted}, torch::kDouble);
  dp.all_reduce(sums, comm::ReduceOp::kSum);
  ClassificationScore score;
  score.passages = static_cast<int64_t>(sums[2].item<double>());
  DS_ASSERT(score.passages == total, "evaluated ", score.passages, " of ", total, " passages");
  score.loss = sums[0].item<double>() / static_cast<double>(total);
  score.accuracy = sums[1].item<double>() / static_cast<double>(total);
  const int64_t majority = majority_class(*run.data.train_labels);
  const auto majority_passages =
      std::count_if(labels.passages.begin(), labels.passages.end(),
                    [&](const data::Passage& p) { return p.label == majority; });
  score.majority_baseline = static_cast<double>(majority_passages) / static_cast<double>(total);
  return score;
}

}  // namespace deepshard::train
