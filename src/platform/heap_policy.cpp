// The heap policy of a training process (heap_policy.h): glibc's mallopt, once per process.
#include "platform/heap_policy.h"

#include <atomic>
#include <string_view>

#include "deepshard/util/error.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace deepshard::platform {
namespace {

constexpr int kMmapThreshold = 32 << 20;  // glibc's upper limit for M_MMAP_THRESHOLD (64-bit)
constexpr int kTrimThreshold = 1 << 30;
constexpr int kTopPad = 64 << 20;

HeapPolicy apply(const HeapRequest& request) {
  HeapPolicy policy = choose_heap_policy(request.deepshard_heap, request.users_setting);
  if (!policy.retained) return policy;
#if defined(__GLIBC__)
  policy.retained = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
                    mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
                    mallopt(M_TOP_PAD, kTopPad) == 1;
  if (!policy.retained)
    policy.reason = "glibc refused the heap settings (mallopt): its default policy";
#else
  policy.retained = false;
  policy.reason = "the C library's default heap policy (not glibc)";
#endif
  return policy;
}

std::atomic<const HeapPolicy*> g_applied{nullptr};

}  // namespace

HeapPolicy choose_heap_policy(const char* deepshard_heap, const std::string& users_setting) {
  const std::string_view wanted =
      deepshard_heap == nullptr || *deepshard_heap == '\0' ? "retain" : deepshard_heap;
  DS_CHECK(wanted == "retain" || wanted == "system", Error, "DEEPSHARD_HEAP=", wanted,
           ": expected retain (the default) or system");
  if (wanted == "system")
    return {false, "the C library's default heap policy (DEEPSHARD_HEAP=system)"};
  if (!users_setting.empty())
    return {false, "the heap policy of " + users_setting + " (set in the environment; kept)"};
  return {true, "retain freed memory (glibc mmap threshold 32 MiB, trim threshold 1 GiB)"};
}

HeapPolicy retain_freed_heap_memory(const HeapRequest& request) {
  static const HeapPolicy policy = apply(request);
  g_applied.store(&policy);
  return policy;
}

std::string heap_policy_status() {
  const HeapPolicy* applied = g_applied.load();
  return applied != nullptr ? applied->reason : "the C library's default heap policy";
}

}  // namespace deepshard::platform
