// The group of a one-rank world (no network): collectives are identities or copies, still
// validated, timed and logged; and the validation every group applies before sending anything.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "deepshard/comm/group.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace local_group_test {

std::unique_ptr<Group> local_group() {
  return Group::create(RendezvousInfo{}, std::chrono::milliseconds(1000));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LocalGroup, CollectivesAreIdentitiesAndCopies) {
  auto group = local_group();
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  at::Tensor t = at::arange(10, at::kFloat);
  for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    group->all_reduce(t, op);
    EXPECT_TRUE(at::equal(t, at::arange(10, at::kFloat)));
  }
  at::Tensor bf = at::arange(10, at::kFloat).to(at::kBFloat16);
  group->all_reduce(bf, ReduceOp::kAvg);
  EXPECT_TRUE(at::equal(bf, at::arange(10, at::kFloat).to(at::kBFloat16)));

  at::Tensor out = at::zeros({7}, at::kBFloat16);
  at::Tensor in = at::randn({7}).to(at::kBFloat16);
  group->all_gather(out, in);
  EXPECT_TRUE(at::equal(out, in));
  out.zero_();
  group->reduce_scatter(out, in, ReduceOp::kAvg);
  EXPECT_TRUE(at::equal(out, in));
  group->broadcast(t, 0);
  group->barrier();

  auto stats = group->log().snapshot();
  EXPECT_EQ(stats["all_reduce"].calls, 5);
  EXPECT_EQ(stats["all_reduce"].bytes, 4 * 10 * 4 + 10 * 2);
  EXPECT_EQ(stats["all_gather"].bytes, 7 * 2);
  EXPECT_EQ(stats["reduce_scatter"].bytes, 7 * 2);
  EXPECT_EQ(stats["broadcast"].calls, 1);
  EXPECT_EQ(stats["barrier"].calls, 1);
  EXPECT_GT(group->log().total().seconds, 0.0);
  group->log().reset();
  EXPECT_EQ(group->log().total().calls, 0);
}

TEST(LocalGroup, AsyncHandlesAndEmptyTensors) {
  auto group = local_group();
  at::Tensor t = at::ones({3});
  Work w = group->all_reduce_async(t);
  EXPECT_FALSE(w.completed());
  w.wait();
  EXPECT_TRUE(w.completed());
  w.wait();
  EXPECT_TRUE(Work().completed());
  Work moved = group->all_reduce_async(t);
  moved = group->all_reduce_async(t);  // the replaced handle is waited for
  moved.wait();
  group->all_reduce(at::empty({0}));
  group->all_gather(at::empty({0}), at::empty({0}));
  EXPECT_EQ(group->log().snapshot()["all_reduce"].calls, 4);
}

TEST(LocalGroup, RejectsWhatGlooCannotMove) {
  auto group = local_group();
  std::string m = error_of([&] { group->all_reduce(at::zeros({5}, at::kBool)); });
  EXPECT_NE(m.find("rank 0: all_reduce of 5 elements (bool)"), std::string::npos) << m;
  EXPECT_NE(m.find("use uint8"), std::string::npos) << m;
  m = error_of([&] { group->all_reduce(at::zeros({5}, at::kComplexFloat)); });
  EXPECT_NE(m.find("supported: float"), std::string::npos) << m;
  m = error_of([&] { group->all_reduce(at::zeros({4, 4}).t()); });
  EXPECT_NE(m.find("contiguous"), std::string::npos) << m;
  m = error_of([&] { group->all_gather(at::zeros({5}), at::zeros({4})); });
  EXPECT_NE(m.find("all_gather of 4 elements (float): needs out.numel() == in.numel() * 1"),
            std::string::npos)
      << m;
  m = error_of([&] { group->reduce_scatter(at::zeros({4}), at::zeros({4}, at::kDouble)); });
  EXPECT_NE(m.find("dtype"), std::string::npos) << m;
  m = error_of([&] { group->broadcast(at::zeros({4}), 1); });
  EXPECT_NE(m.find("root 1"), std::string::npos) << m;
}

TEST(LocalGroup, CreateRejectsAnInconsistentRendezvous) {
  RendezvousInfo info;
  info.rank = 2;
  info.world_size = 2;
  EXPECT_THROW(Group::create(info, std::chrono::milliseconds(100)), CommError);
}

}  // namespace local_group_test
}  // namespace deepshard::comm
