// Helpers of the I/O tests: a filesystem mounted for one test (needs root; the test is skipped,
// saying why, where mounting is not allowed) and byte patterns.
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "support/test_support.h"

namespace deepshard::io::testing {

class ScopedMount {
 public:
  // mount -t `type` -o `options` none <fresh folder>
  ScopedMount(const std::string& type, const std::string& options) : path_(dir_.file("mnt")) {
    ::mkdir(path_.c_str(), 0755);
    mounted_ = ::mount("none", path_.c_str(), type.c_str(), 0, options.c_str()) == 0;
    if (!mounted_) why_ = std::strerror(errno);
  }
  ~ScopedMount() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& path() const { return path_; }

 private:
  deepshard::testing::TempDir dir_;
  std::string path_;
  bool mounted_ = false;
  std::string why_;
};

inline void fill_pattern(void* data, int64_t bytes, uint32_t seed) {
  auto* p = static_cast<uint32_t*>(data);
  for (int64_t i = 0; i < bytes / 4; ++i) p[i] = seed * 2654435761u + static_cast<uint32_t>(i);
}

}  // namespace deepshard::io::testing
