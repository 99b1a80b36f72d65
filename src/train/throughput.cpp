// The throughput hook: per-step communication (metrics comm_wait_s, comm_bytes, and both per link
// class: comm_bytes_intra_node, comm_wait_s_cross_node, ...; the cross-node peer this rank waited
// for most: cross_node_waited_for_rank) and, over the
// steps after the warm-up step, mean tokens/s and the share of time blocked on collectives. The
// communication is the job group's and, with tensor or pipeline parallelism, that of this rank's
// groups of the rank grid's axes (the data axis carries the engine's gradient reduction, the
// tensor axis the blocks' all-reduces), each also reported on its own (comm_wait_s_<axis>, and
// summary.json's comm_by_group). The pipeline's point-to-point links are measured by the pipeline
// engine itself (pipeline_comm_wait_share).
#include <nlohmann/json.hpp>

#include "monitor/process_memory.h"
#include "train/training_run.h"

namespace deepshard::train {
namespace {

struct NamedGroup {
  std::string name;
  comm::Group* group;
};

// The job group and this rank's groups of more than one rank on the grid's axes.
std::vector<NamedGroup> comm_groups(const TrainingRun& run) {
  std::vector<NamedGroup> out = {{"job", &run.group}};
  if (!run.axes) return out;
  for (const NamedGroup& g :
       {NamedGroup{"tensor", run.axes->tensor.get()}, NamedGroup{"data", run.axes->data.get()},
        NamedGroup{"pipeline", run.axes->pipeline.get()},
        NamedGroup{"model", run.model_group.get()}}) {
    if (g.group != nullptr && g.group->size() > 1) out.push_back(g);
  }
  return out;
}

class ThroughputHook : public StepHook {
 public:
  explicit ThroughputHook(const TrainingRun& run) : groups_(comm_groups(run)) {
    for (const NamedGroup& g : groups_) {
      before_.push_back(g.group->log().total());
      before_links_.push_back(g.group->log().links());
      before_lags_.push_back(g.group->log().peer_lags());
    }
  }

  void after_step(TrainingRun& run, StepRecord& step) override {
    double comm_wait = 0.0;
    int64_t bytes = 0;
    for (size_t i = 0; i < groups_.size(); ++i) {
      const comm::CommStats now = groups_[i].group->log().total();
      const double wait = now.wait_seconds - before_[i].wait_seconds;
      if (i > 0) step.metrics["comm_wait_s_" + groups_[i].name] = wait;
      comm_wait += wait;
      bytes += now.bytes - before_[i].bytes;
      before_[i] = now;
    }
    add_link_metrics(step);
    add_peer_lag_metrics(step);
    if (!step.first) {
      tokens_per_s_sum_ += step.tokens_per_s;
      ++timed_steps_;
      timed_wait_ += comm_wait;
      timed_time_ += step.step_time;
    }
    step.metrics["comm_wait_s"] = comm_wait;
    step.metrics["comm_bytes"] = bytes;
    step.metrics["rss_bytes"] = monitor::current_rss_bytes();
  }

  void finish(TrainingRun& run) override {
    run.summary.mean_tokens_per_s = timed_steps_ > 0 ? tokens_per_s_sum_ / timed_steps_ : 0.0;
    run.summary.comm_wait_share = timed_time_ > 0 ? timed_wait_ / timed_time_ : 0.0;
  }

  // Every group's collectives over the whole run (summary.json's "comm" is the job group's).
  void add_to_summary(const TrainingRun&, nlohmann::json& out) const override {
    if (groups_.size() <= 1) return;
    nlohmann::json by_group = nlohmann::json::object();
    for (const NamedGroup& g : groups_)
      by_group[g.name] = {{"ranks", g.group->size()}, {"ops", comm_ops_json(g.group->log())}};
    out["comm_by_group"] = by_group;
  }

 private:
  // comm_bytes_<link>, comm_wait_s_<link> (intra_node, cross_node): this step's collectives of
  // every group by link class (docs/comm.md), zero for a class the job has no link of.
  void add_link_metrics(StepRecord& step) {
    std::map<comm::LinkClass, comm::CommStats> step_links;
    for (size_t i = 0; i < groups_.size(); ++i) {
      const auto now = groups_[i].group->log().links();
      for (const auto& [link, stats] : now) {
        const comm::CommStats& before = before_links_[i][link];
        comm::CommStats& sum = step_links[link];
        sum.bytes += stats.bytes - before.bytes;
        sum.wait_seconds += stats.wait_seconds - before.wait_seconds;
      }
      before_links_[i] = now;
    }
    for (comm::LinkClass link : {comm::LinkClass::kIntraNode, comm::LinkClass::kCrossNode}) {
      const std::string name = comm::to_string(link);
      step.metrics["comm_bytes_" + name] = step_links[link].bytes;
      step.metrics["comm_wait_s_" + name] = step_links[link].wait_seconds;
    }
  }

  // cross_node_waited_for_rank, cross_node_peer_lag_s: of this rank's cross-node peers, the one
  // whose data arrived latest this step (summed lateness behind the first peer's, docs/comm.md),
  // when the job exchanges data across nodes.
  void add_peer_lag_metrics(StepRecord& step) {
    std::map<int, double> lags;
    for (size_t i = 0; i < groups_.size(); ++i) {
      const auto now = groups_[i].group->log().peer_lags();
      for (const auto& [peer, seconds] : now) lags[peer] += seconds - before_lags_[i][peer];
      before_lags_[i] = now;
    }
    if (lags.empty()) return;
    auto latest = lags.begin();
    for (auto it = lags.begin(); it != lags.end(); ++it) {
      if (it->second > latest->second) latest = it;
    }
    step.metrics["cross_node_waited_for_rank"] = latest->first;
    step.metrics["cross_node_peer_lag_s"] = latest->second;
  }

  std::vector<NamedGroup> groups_;
  std::vector<comm::CommStats> before_;
  std::vector<std::map<comm::LinkClass, comm::CommStats>> before_links_;
  std::vector<std::map<int, double>> before_lags_;
  double tokens_per_s_sum_ = 0.0;
  int64_t timed_steps_ = 0;
  double timed_wait_ = 0.0, timed_time_ = 0.0;  // comm wait and wall time of the timed steps
};

}  // namespace

nlohmann::json comm_ops_json(const comm::CommLog& log) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [op, stats] : log.snapshot()) {
    ops[op] = {{"calls", stats.calls},
               {"bytes", stats.bytes},
               {"seconds", stats.seconds},
               {"wait_seconds", stats.wait_seconds}};
  }
  return ops;
}

std::unique_ptr<StepHook> make_throughput_hook(const TrainingRun& run) {
  return std::make_unique<ThroughputHook>(run);
}

}  // namespace deepshard::train
