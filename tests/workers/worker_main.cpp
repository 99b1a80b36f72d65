// main() of every multi-rank test worker: join the group, run the scenario named by argv[1] (or
// several joined by '+', in order on the same group: one job instead of one per scenario), print
// "scenario NAME passed on rank R" after each, and exit 0, or 1 at the first that fails.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "comm/transport_options.h"
#include "support/forced_kernel_paths.h"
#include "util/log.h"
#include "workers/worker.h"

namespace deepshard::testing {

std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> registry;
  return registry;
}

int worker_timeout_ms() {
  const char* env = std::getenv("DS_TEST_TIMEOUT_MS");
  return env ? std::atoi(env) : 60000;
}

}  // namespace deepshard::testing

namespace {

// argv[1] split at '+'; empty when a name is not a registered scenario.
std::vector<std::string> scenario_names(const std::string& arg) {
  std::vector<std::string> names;
  for (size_t start = 0;;) {
    const size_t end = arg.find('+', start);
    names.push_back(arg.substr(start, end == std::string::npos ? end : end - start));
    if (deepshard::testing::scenarios().count(names.back()) == 0) return {};
    if (end == std::string::npos) return names;
    start = end + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace deepshard;
  const std::vector<std::string> names =
      argc < 2 ? std::vector<std::string>{} : scenario_names(argv[1]);
  if (names.empty()) {
    std::fprintf(stderr, "usage: %s SCENARIO[+SCENARIO...] [ARGS...]; scenarios:", argv[0]);
    for (auto& [name, fn] : testing::scenarios()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::string running = argv[1];  // the whole list until a scenario starts (rendezvous, group)
  try {
    testing::apply_forced_kernel_paths();
    auto info = comm::rendezvous_from_env();
    log::set_rank(info.rank);
    comm::GroupOptions options;
    options.timeout = std::chrono::milliseconds(testing::worker_timeout_ms());
    if (const char* transport = std::getenv("DS_TEST_TRANSPORT")) {
      options.transport = comm::parse_transport(transport, "DS_TEST_TRANSPORT");
    }
    auto group = comm::create_group(info, options);
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const std::string& name : names) {
      running = name;
      testing::scenarios().at(name)(*group, args);
      std::printf("scenario %s passed on rank %d\n", name.c_str(), info.rank);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scenario %s FAILED: %s\n", running.c_str(), e.what());
    return 1;
  }
}
