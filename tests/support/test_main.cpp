// main() of the test binaries that use libtorch: googletest's, after forcing the kernel paths the
// environment asks for (forced_kernel_paths.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>

#include "support/forced_kernel_paths.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    const std::string forced = deepshard::testing::apply_forced_kernel_paths();
    if (!forced.empty()) std::fprintf(stderr, "forced %s\n", forced.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  return RUN_ALL_TESTS();
}
