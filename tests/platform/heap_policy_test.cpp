// The heap policy (platform/heap_policy.h): the decision table, and that with it in force a
// step-like cycle of allocating, touching and freeing a 16 MiB block no longer page-faults.
#include "platform/heap_policy.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "deepshard/util/error.h"

namespace deepshard::platform {
namespace heap_policy_test {

TEST(HeapPolicy, RetainsByDefaultAndKeepsTheUsersChoice) {
  EXPECT_TRUE(choose_heap_policy(nullptr, "").retained);
  EXPECT_TRUE(choose_heap_policy("retain", "").retained);
  EXPECT_TRUE(choose_heap_policy("", "").retained);
  const HeapPolicy system = choose_heap_policy("system", "");
  EXPECT_FALSE(system.retained);
  EXPECT_NE(system.reason.find("DEEPSHARD_HEAP=system"), std::string::npos) << system.reason;
  const HeapPolicy users = choose_heap_policy(nullptr, "MALLOC_TRIM_THRESHOLD_");
  EXPECT_FALSE(users.retained);
  EXPECT_NE(users.reason.find("MALLOC_TRIM_THRESHOLD_"), std::string::npos) << users.reason;
}

TEST(HeapPolicy, AnUnknownValueIsAnErrorNamingTheVariable) {
  try {
    choose_heap_policy("keep", "");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DEEPSHARD_HEAP=keep"), std::string::npos) << e.what();
  }
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A step-like cycle: allocates three 24 MiB blocks (activations), touches them, frees them; returns
// the page faults that `cycles` of them took.
long faults_of_step_cycles(int cycles) {
  constexpr size_t kBytes = 24u << 20;
  const long before = minor_faults();
  for (int i = 0; i < cycles; ++i) {
    char* blocks[3];
    for (char*& block : blocks) {
      block = static_cast<char*>(std::malloc(kBytes));
      if (block == nullptr) std::abort();
      std::memset(block, i, kBytes);
      asm volatile("" : : "r"(block) : "memory");  // keep the writes
    }
    for (char* block : blocks) std::free(block);
  }
  return minor_faults() - before;
}

TEST(HeapPolicy, RepeatedStepsReuseTheirPages) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      std::getenv("MALLOC_TOP_PAD_") || std::getenv("GLIBC_TUNABLES"))
    GTEST_SKIP() << "the environment sets a heap policy";
#if defined(__GLIBC__)
  // glibc's default gives the freed 72 MiB at the heap's top back to the kernel (trim threshold
  // twice the adaptive mmap threshold, 48 MiB here): each cycle faults its 18 432 pages in again.
  faults_of_step_cycles(1);
  const long system_faults = faults_of_step_cycles(5);
  EXPECT_GT(system_faults, 5 * 18432 / 2) << "glibc's default no longer trims: the control case";
  const HeapPolicy policy = retain_freed_heap_memory();
  ASSERT_TRUE(policy.retained) << policy.reason;
  EXPECT_EQ(heap_policy_status(), policy.reason);
  faults_of_step_cycles(1);  // the first cycle grows the heap
  const long retained_faults = faults_of_step_cycles(5);
  EXPECT_LT(retained_faults, 500) << "with the default policy: " << system_faults;
#else
  EXPECT_FALSE(retain_freed_heap_memory().retained);
#endif
}

}  // namespace heap_policy_test
}  // namespace deepshard::platform
