// PipeLinks: a stage's two-member link groups and its sends and receives over them
// (pipeline_p2p.h).
#include "parallel/pipeline_p2p.h"

#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

// The two-member group of stages `lower` and `lower + 1` of this rank's pipeline, one direction.
std::unique_ptr<comm::Group> link(const comm::Group& world, const RankGrid& grid, int lower,
                                  const char* direction, const comm::GroupOptions& options) {
  GridCoord c = grid.coord(world.rank());
  c.pipeline = lower;
  const int a = grid.rank(c);
  c.pipeline = lower + 1;
  const int b = grid.rank(c);
  return comm::create_subgroup(world, {a, b}, detail::concat("pipe/", direction, "/", a), options);
}

}  // namespace

PipeLinks::PipeLinks(const comm::Group& world, const RankGrid& grid,
                     const comm::GroupOptions& options)
    : stage_(grid.coord(world.rank()).pipeline), stages_(grid.pipeline_size()) {
  if (stage_ > 0) {
    act_prev_ = link(world, grid, stage_ - 1, "act", options);
    grad_prev_ = link(world, grid, stage_ - 1, "grad", options);
  }
  if (stage_ + 1 < stages_) {
    act_next_ = link(world, grid, stage_, "act", options);
    grad_next_ = link(world, grid, stage_, "grad", options);
  }
  if (stages_ > 1 && (is_first() || is_last())) {
    GridCoord c = grid.coord(world.rank());
    c.pipeline = 0;
    const int first = grid.rank(c);
    c.pipeline = stages_ - 1;
    tied_ = comm::create_subgroup(world, {first, grid.rank(c)}, detail::concat("pipe/tied/", first),
                                  options);
  }
}

PipeLinks::~PipeLinks() {
  try {
    flush();
  } catch (...) {
    // A failed send was already reported by the collective's own log; nothing to add here.
  }
}

void PipeLinks::send(comm::Group& link, const at::Tensor& t) {
  DS_ASSERT(t.is_contiguous(), "pipeline send of a non-contiguous tensor");
  in_flight_.emplace_back(link.broadcast_async(t, link.rank()), t);
}

void PipeLinks::send_activation(const at::Tensor& t) {
  DS_ASSERT(act_next_, "stage ", stage_, " is the last: no next stage to send activations to");
  send(*act_next_, t);
}

void PipeLinks::send_gradient(const at::Tensor& t) {
  DS_ASSERT(grad_prev_, "stage ", stage_, " is the first: no previous stage to send gradients to");
  send(*grad_prev_, t);
}

void PipeLinks::recv_activation(const at::Tensor& out) {
  DS_ASSERT(act_prev_, "stage ", stage_, " is the first: no previous stage to receive from");
  act_prev_->broadcast(out, 0);
}

void PipeLinks::recv_gradient(const at::Tensor& out) {
  DS_ASSERT(grad_next_, "stage ", stage_, " is the last: no next stage to receive from");
  grad_next_->broadcast(out, 1);
}

void PipeLinks::flush() {
  while (!in_flight_.empty()) {
    in_flight_.front().first.wait();
    in_flight_.pop_front();
  }
}

}  // namespace deepshard::parallel
