// The executable's environment readers (cli/environment.h): the user's own heap settings, which
// deepshard's heap policy leaves alone (platform/heap_policy.h).
#include "cli/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace deepshard::cli {
namespace environment_test {

constexpr const char* kHeapVariables[] = {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                                          "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"};

TEST(ProcessEnvironment, NamesTheUsersOwnHeapSetting) {
  for (const char* name : kHeapVariables) ::unsetenv(name);
  EXPECT_EQ(users_heap_setting_from_process(), "");
  ::setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX2", 1);  // not a malloc tunable
  EXPECT_EQ(users_heap_setting_from_process(), "");
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0", 1);
  EXPECT_EQ(users_heap_setting_from_process(), "GLIBC_TUNABLES (glibc.malloc)");
  ::setenv("MALLOC_TRIM_THRESHOLD_", "0", 1);
  EXPECT_EQ(users_heap_setting_from_process(), "MALLOC_TRIM_THRESHOLD_");
  ::setenv("MALLOC_TRIM_THRESHOLD_", "", 1);  // empty counts as unset
  EXPECT_EQ(users_heap_setting_from_process(), "GLIBC_TUNABLES (glibc.malloc)");
  for (const char* name : kHeapVariables) ::unsetenv(name);
}

}  // namespace environment_test
}  // namespace deepshard::cli
