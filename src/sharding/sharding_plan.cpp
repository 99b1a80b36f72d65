// UnitCalls and ShardingPlan (see sharding_plan.h).
#include "deepshard/sharding/sharding_plan.h"

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::sharding {

at::Tensor UnitCalls::operator()(size_t unit, const UnitBody& body) const {
  if (wrappers_.empty()) return body();
  // wrappers_[0] is outermost: it gets a body that runs the rest of the chain.
  std::function<at::Tensor(size_t)> run = [&](size_t i) -> at::Tensor {
    if (i == wrappers_.size()) return body();
    return wrappers_[i].wrap(unit, [&run, i] { return run(i + 1); });
  };
  return run(0);
}

int UnitCalls::add(UnitWrapper wrapper, int level) {
  DS_CHECK(wrapper != nullptr, Error, "UnitCalls::add: no wrapper");
  // Before the first wrapper of a lower level: outer levels first, equal levels in order.
  auto at = std::find_if(wrappers_.begin(), wrappers_.end(),
                         [level](const Entry& e) { return e.level < level; });
  const int id = next_id_++;
  wrappers_.insert(at, Entry{id, level, std::move(wrapper)});
  return id;
}

void UnitCalls::remove(int id) {
  std::erase_if(wrappers_, [id](const Entry& e) { return e.id == id; });
}

ShardingPlan& ShardingPlan::unit(std::string name, std::shared_ptr<torch::nn::Module> module) {
  DS_CHECK(module != nullptr, Error, "ShardingPlan::unit(", name, "): no module");
  units_.push_back({std::move(name), std::move(module)});
  return *this;
}

ShardingPlan& ShardingPlan::tie(std::string param, std::string users) {
  tied_.push_back({std::move(param), std::move(users)});
  return *this;
}

}  // namespace deepshard::sharding
