// Stage3Unit's state machine on one rank: the states a gather, a release, a reshard and a
// backward's gradient buffer move a unit through, the parameters' storage in each, and an
// operation out of order refused with an internal error naming the unit, the operation and the
// state.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "deepshard/comm/group.h"
#include "deepshard/util/error.h"
#include "zero/stage3/unit.h"

namespace deepshard::zero {
namespace unit_state_test {

struct OneUnit {
  OneUnit() : group(comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10))) {
    weight = torch::arange(6, torch::kFloat).view({2, 3}).requires_grad_(true);
    bias = torch::ones({3}).requires_grad_(true);
    unit = std::make_unique<Stage3Unit>(
        "block 0",
        std::vector<FlatParamEntry>{{"block.weight", weight, 0, 0, true},
                                    {"block.bias", bias, 0, 0, false}},
        group->size());
    shard = torch::zeros({unit->slice_numel()});
    unit->partition(*group, shard);
  }
  std::unique_ptr<comm::Group> group;
  at::Tensor weight, bias, shard;
  std::unique_ptr<Stage3Unit> unit;
};

// The message of the Error `fn` throws (empty if none).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Stage3UnitState, GatherReleaseReshardAndGradientsMoveThroughTheStates) {
  OneUnit t;
  Stage3Unit& unit = *t.unit;
  EXPECT_EQ(unit.state(), UnitState::kGathered);  // it holds the model's parameters
  unit.release();
  EXPECT_EQ(unit.state(), UnitState::kReleased);
  EXPECT_FALSE(unit.holds_storage());
  EXPECT_EQ(t.weight.storage().nbytes(), 0u);

  unit.start_gather(*t.group);
  EXPECT_EQ(unit.state(), UnitState::kGathering);
  EXPECT_TRUE(unit.holds_storage());
  unit.wait_gather();
  EXPECT_EQ(unit.state(), UnitState::kGathered);
  EXPECT_TRUE(torch::equal(t.weight, torch::arange(6, torch::kFloat).view({2, 3})));

  unit.begin_grads();
  EXPECT_EQ(unit.state(), UnitState::kReducing);
  EXPECT_TRUE(unit.grads_begun());
  EXPECT_EQ(t.weight.grad().numel(), 6);
  const at::Tensor grads = unit.take_grads();
  EXPECT_EQ(unit.state(), UnitState::kGathered);
  EXPECT_EQ(grads.numel(), unit.padded_numel());
  EXPECT_FALSE(t.weight.grad().defined());

  unit.reshard();
  EXPECT_EQ(unit.state(), UnitState::kSharded);
  unit.gather(*t.group);  // from at rest
  EXPECT_EQ(unit.state(), UnitState::kGathered);
  unit.gather(*t.group);  // a refresh of a gathered unit
  EXPECT_EQ(unit.state(), UnitState::kGathered);
  EXPECT_TRUE(torch::equal(t.bias, torch::ones({3})));
}

TEST(Stage3UnitState, AnOperationOutOfOrderIsAnInternalErrorNamingTheUnitAndState) {
  OneUnit t;
  Stage3Unit& unit = *t.unit;
  unit.reshard();
  EXPECT_EQ(error_of([&] { unit.release(); }),
            "internal error: ZeRO-3 unit block 0: release while sharded (only from gathered)");
  EXPECT_EQ(error_of([&] { unit.begin_grads(); }),
            "internal error: ZeRO-3 unit block 0: begin_grads while sharded (only from gathered)");
  EXPECT_EQ(error_of([&] { unit.take_grads(); }),
            "internal error: ZeRO-3 unit block 0: take_grads while sharded (only from reducing)");
  unit.start_gather(*t.group);
  EXPECT_EQ(error_of([&] { unit.start_gather(*t.group); }),
            "internal error: ZeRO-3 unit block 0: start_gather while gathering (only from "
            "sharded or released or gathered)");
  EXPECT_EQ(error_of([&] { unit.reshard(); }),
            "internal error: ZeRO-3 unit block 0: reshard while gathering (only from gathered)");
  unit.wait_gather();
  unit.begin_grads();
  EXPECT_EQ(error_of([&] { unit.release(); }),
            "internal error: ZeRO-3 unit block 0: release while reducing (only from gathered)");
  EXPECT_EQ(error_of([&] { unit.start_gather(*t.group); }),
            "internal error: ZeRO-3 unit block 0: start_gather while reducing (only from "
            "sharded or released or gathered)");
  EXPECT_EQ(unit.state(), UnitState::kReducing);  // a refused operation changes nothing
  unit.take_grads();
  unit.release();
  EXPECT_EQ(unit.state(), UnitState::kReleased);
}

}  // namespace unit_state_test
}  // namespace deepshard::zero
