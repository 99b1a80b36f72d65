// main() of every multi-rank test worker: join the group, run one scenario, exit 0 or 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

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

int main(int argc, char** argv) {
  using namespace deepshard;
  if (argc < 2 || testing::scenarios().count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: %s SCENARIO [ARGS...]; scenarios:", argv[0]);
    for (auto& [name, fn] : testing::scenarios()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
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
    testing::scenarios().at(argv[1])(*group, args);
    std::printf("scenario %s passed on rank %d\n", argv[1], info.rank);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scenario %s FAILED: %s\n", argv[1], e.what());
    return 1;
  }
}
