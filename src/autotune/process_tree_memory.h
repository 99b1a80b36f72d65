// Resident memory of a process tree, read from /proc: the tuner's per-trial memory limit. A trial's
// launcher and its ranks are sampled every few tens of milliseconds; the largest process (a rank)
// is compared with the limit. Chosen over RLIMIT_AS: a libtorch rank reserves far more address
// space than it touches (glibc's per-thread malloc arenas, OpenMP and Gloo thread stacks), so an
// address-space limit either fails ranks that would fit or must be set so loose that it limits
// nothing, and its failure is a bad_alloc thrown anywhere; resident memory is what the budget means
// and what the estimate predicts. Linux only. Private to the autotune layer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace deepshard::autotune {

// `root` and every process descending from it (children found through /proc/<pid>/stat's parent
// field). Processes that exit while being read are skipped.
std::vector<pid_t> process_tree(pid_t root);

// Resident bytes of one process (/proc/<pid>/statm), 0 if it is gone.
int64_t resident_bytes(pid_t pid);

// The largest resident size among the processes of the tree (a rank's).
int64_t largest_resident_in_tree(pid_t root);

}  // namespace deepshard::autotune
