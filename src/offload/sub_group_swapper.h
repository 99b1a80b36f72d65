// ZeRO-Infinity's optimizer swapping, without ZeRO: a rank's optimizer state (fp32 arrays of equal
// length: e.g. master weights, Adam exp_avg and exp_avg_sq) cut into sub-groups of at most
// sub_group_size elements, each sub-group's arrays in one swap file (NVMe). for_each() visits the
// sub-groups in order: read -> the caller's update -> write back, through a ring of reusable
// aligned buffers, so the memory held is the buffers', not the state's. With pipeline_read the read
// of sub-group i+1 runs while the caller updates i; with pipeline_write the write of i runs while
// the caller updates i+1 (DeepSpeed's PipelinedOptimizerSwapper). A failed transfer throws IoError
// naming the file, after every other transfer in flight finished (no buffer is freed under I/O).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/aio_options.h"

namespace deepshard::io {
class AsyncIo;
class AlignedBuffer;
class SwapDir;
class SwapFile;
}  // namespace deepshard::io

namespace deepshard::offload {

struct SubGroup {
  int64_t offset = 0;  // first element (in the rank's optimizer-state arrays)
  int64_t numel = 0;
};

// Consecutive sub-groups of at most `sub_group_size` elements covering [0, numel).
std::vector<SubGroup> split_sub_groups(int64_t numel, int64_t sub_group_size);

struct SwapOptions {
  std::string nvme_path;  // offload_optimizer.nvme_path
  std::string run;        // folder under nvme_path: <nvme_path>/<run>/rank<R>/
  int rank = 0;
  int64_t buffer_count = 4;  // offload_optimizer.buffer_count: buffers of one array of the
                             // largest sub-group; a sub-group in flight takes `arrays` of them
  bool pin_memory = true;    // lock the buffers in RAM (mlock)
  bool pipeline_read = false;
  bool pipeline_write = false;
  io::AioOptions aio;
};

class SubGroupSwapper {
 public:
  // `arrays`: fp32 arrays per sub-group (each sub-group's file holds them back to back, each
  // aligned). Creates the swap folder and files (checked: path, O_DIRECT, free space).
  SubGroupSwapper(std::vector<SubGroup> groups, int arrays, const SwapOptions& options);
  ~SubGroupSwapper();

  // Bytes the swap files take for these sub-groups (for the start-up check and the estimator).
  static int64_t file_bytes(const std::vector<SubGroup>& groups, int arrays);
  // Sub-groups in flight at once (the ring), and the RAM the buffers take.
  static int64_t slots_for(int64_t buffer_count, int arrays);
  static int64_t buffer_bytes(const std::vector<SubGroup>& groups, int arrays,
                              int64_t buffer_count);

  // The caller's work on one sub-group: its arrays in RAM (`arrays` pointers of group.numel
  // floats).
  using Visit = std::function<void(size_t index, const SubGroup& group, float* const* arrays)>;
  // read -> visit -> write for every sub-group, in order.
  void for_each(const Visit& visit);
  // Visit every sub-group without reading first (the arrays hold zeros), then write: initialises
  // the files.
  void initialize(const Visit& fill);
  // read -> visit, no write back (reading for a checkpoint).
  void read_each(const Visit& visit);

  const std::vector<SubGroup>& groups() const { return groups_; }
  int64_t slots() const { return slots_; }
  int64_t held_bytes() const;  // RAM held by the buffers
  const std::string& folder() const;

 private:
  void run(const Visit& visit, bool read, bool write);

  std::vector<SubGroup> groups_;
  int arrays_;
  int64_t stride_ = 0;  // bytes of one array slot in a buffer (largest sub-group, aligned)
  int64_t slots_ = 1;
  bool pipeline_read_, pipeline_write_;
  std::unique_ptr<io::SwapDir> dir_;
  std::vector<std::unique_ptr<io::SwapFile>> files_;
  std::vector<io::AlignedBuffer> buffers_;  // one per slot: `arrays` arrays of stride_ bytes
  std::unique_ptr<io::AsyncIo> aio_;        // declared last: destroyed first (I/O drained)
};

}  // namespace deepshard::offload
