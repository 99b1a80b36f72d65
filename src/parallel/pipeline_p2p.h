// Point-to-point links of a pipeline stage: activations to the next stage, gradients back to the
// previous one, and the tied-weight group of the first and last stage. comm::Group has
// collectives only, so a link is a two-member sub-group whose broadcast from the sender is the
// send (DeepSpeed's pipe/p2p.py does the same where torch lacks send/recv). Each direction has
// its own group ("pipe/act/<lower rank>", "pipe/grad/<lower rank>"): the 1F1B schedule moves
// activations in micro-batch order and gradients in micro-batch order, but interleaves the two
// differently on the two sides of a link; one ordered channel per direction keeps every group's
// issue order the same on both members. Sends are asynchronous (they complete on the group's
// own executor while the stage computes); receives block.
#pragma once

#include <ATen/core/Tensor.h>

#include <deque>
#include <memory>
#include <utility>

#include "deepshard/comm/group.h"
#include "comm/transport_options.h"
#include "parallel/rank_grid.h"

namespace deepshard::parallel {

class PipeLinks {
 public:
  // Every rank of `world` calls this at the same point (after make_parallel_groups). Links with
  // the stages before and after this rank's (same data and tensor coordinates), made in pipeline
  // order so that creation never waits in a cycle; then the tied group (first and last stage).
  PipeLinks(const comm::Group& world, const RankGrid& grid, const comm::GroupOptions& options);
  ~PipeLinks();

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == stages_ - 1; }

  // To the next stage / the previous one; `t` (contiguous) is kept alive until sent.
  void send_activation(const at::Tensor& t);
  void send_gradient(const at::Tensor& t);
  // From the previous stage / the next one, into `out` (contiguous, of the sent shape and dtype).
  void recv_activation(const at::Tensor& out);
  void recv_gradient(const at::Tensor& out);
  // Waits for every send in flight (the engine calls it once per batch: a sent tensor stays
  // referenced until then).
  void flush();

  // The first and last stage (two members); null on the other stages and with one stage.
  comm::Group* tied() { return tied_.get(); }

 private:
  void send(comm::Group& link, const at::Tensor& t);

  int stage_, stages_;
  std::unique_ptr<comm::Group> act_prev_, grad_prev_, act_next_, grad_next_, tied_;
  std::deque<std::pair<comm::Work, at::Tensor>> in_flight_;
};

}  // namespace deepshard::parallel
