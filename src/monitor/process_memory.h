// Resident memory of this process, from the kernel: the peak (getrusage ru_maxrss) and the
// current value (/proc/self/statm). Benchmarks and summary.json report these beside the ledger.
#pragma once

#include <cstdint>

namespace deepshard::monitor {

int64_t peak_rss_bytes();
int64_t current_rss_bytes();  // 0 where /proc is not available

}  // namespace deepshard::monitor
