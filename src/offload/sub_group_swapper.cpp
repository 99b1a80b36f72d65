// SubGroupSwapper (sub_group_swapper.h): the swap files, the buffer ring and the pipelined
// read -> update -> write loop.
#include "offload/sub_group_swapper.h"

#include <algorithm>
#include <cstring>

#include "deepshard/util/error.h"
#include "io/aligned_buffer.h"
#include "io/async_io.h"
#include "io/swap_file.h"

namespace deepshard::offload {

std::vector<SubGroup> split_sub_groups(int64_t numel, int64_t sub_group_size) {
  DS_CHECK(sub_group_size > 0, ConfigError,
           "zero_optimization.sub_group_size: must be positive, got ", sub_group_size);
  std::vector<SubGroup> out;
  for (int64_t at = 0; at < numel; at += sub_group_size)
    out.push_back({at, std::min(sub_group_size, numel - at)});
  return out;
}

namespace {

int64_t array_bytes(int64_t numel) { return io::align_up(numel * int64_t{4}); }

int64_t largest(const std::vector<SubGroup>& groups) {
  int64_t n = 0;
  for (const SubGroup& g : groups) n = std::max(n, g.numel);
  return n;
}

}  // namespace

int64_t SubGroupSwapper::file_bytes(const std::vector<SubGroup>& groups, int arrays) {
  int64_t total = 0;
  for (const SubGroup& g : groups) total += arrays * array_bytes(g.numel);
  return total;
}

int64_t SubGroupSwapper::slots_for(int64_t buffer_count, int arrays) {
  return std::max<int64_t>(1, buffer_count / arrays);
}

int64_t SubGroupSwapper::buffer_bytes(const std::vector<SubGroup>& groups, int arrays,
                                      int64_t buffer_count) {
  if (groups.empty()) return 0;
  return slots_for(buffer_count, arrays) * arrays * array_bytes(largest(groups));
}

SubGroupSwapper::SubGroupSwapper(std::vector<SubGroup> groups, int arrays,
                                 const SwapOptions& options)
    : groups_(std::move(groups)),
      arrays_(arrays),
      stride_(array_bytes(largest(groups_))),
      slots_(slots_for(options.buffer_count, arrays)),
      pipeline_read_(options.pipeline_read),
      pipeline_write_(options.pipeline_write) {
  DS_CHECK(arrays_ >= 1, Error, "SubGroupSwapper: no arrays");
  dir_ = std::make_unique<io::SwapDir>(options.nvme_path, options.run, options.rank,
                                       file_bytes(groups_, arrays_));
  for (size_t i = 0; i < groups_.size(); ++i) {
    files_.push_back(dir_->create("optimizer_subgroup" + std::to_string(i) + ".swp",
                                  arrays_ * array_bytes(groups_[i].numel)));
  }
  for (int64_t s = 0; s < slots_ && !groups_.empty(); ++s)
    buffers_.emplace_back(arrays_ * stride_, options.pin_memory);
  aio_ = std::make_unique<io::AsyncIo>(options.aio);
}

SubGroupSwapper::~SubGroupSwapper() {
  aio_.reset();  // before the buffers and files go
}

int64_t SubGroupSwapper::held_bytes() const {
  int64_t total = 0;
  for (const auto& b : buffers_) total += b.size();
  return total;
}

const std::string& SubGroupSwapper::folder() const { return dir_->path(); }

void SubGroupSwapper::for_each(const Visit& visit) { run(visit, true, true); }
void SubGroupSwapper::initialize(const Visit& fill) { run(fill, false, true); }
void SubGroupSwapper::read_each(const Visit& visit) { run(visit, true, false); }

void SubGroupSwapper::run(const Visit& visit, bool read, bool write) {
  const size_t n = groups_.size();
  const size_t slots = static_cast<size_t>(slots_);
  std::vector<std::vector<io::IoTicket>> reads(slots), writes(slots);
  auto wait_all = [&](std::vector<io::IoTicket>& tickets) {
    for (auto& t : tickets) aio_->wait(t);
    tickets.clear();
  };
  auto array_ptr = [&](size_t slot, int a) {
    return buffers_[slot].as<char>() + static_cast<int64_t>(a) * stride_;
  };
  auto transfer = [&](io::IoOp op, size_t g, std::vector<io::IoTicket>& into) {
    const int64_t bytes = array_bytes(groups_[g].numel);
    for (int a = 0; a < arrays_; ++a)
      into.push_back(aio_->submit(op, *files_[g], array_ptr(g % slots, a), bytes, a * bytes));
  };
  auto start_read = [&](size_t g) {
    const size_t s = g % slots;
    wait_all(writes[s]);  // the slot's previous sub-group must be on disk first
    if (read) {
      transfer(io::IoOp::kRead, g, reads[s]);
    } else {
      std::memset(buffers_[s].data(), 0, static_cast<size_t>(buffers_[s].size()));
    }
  };
  try {
    size_t next_read = 0;
    std::vector<float*> ptrs(arrays_);
    for (size_t i = 0; i < n; ++i) {
      const size_t s = i % slots;
      if (next_read <= i) start_read(next_read++);
      wait_all(reads[s]);
      if (pipeline_read_ && slots >= 2 && next_read == i + 1 && i + 1 < n) start_read(next_read++);
      for (int a = 0; a < arrays_; ++a) ptrs[a] = reinterpret_cast<float*>(array_ptr(s, a));
      visit(i, groups_[i], ptrs.data());
      if (write) {
        transfer(io::IoOp::kWrite, i, writes[s]);
        if (!pipeline_write_) wait_all(writes[s]);
      }
    }
    for (auto& w : writes) wait_all(w);
  } catch (...) {
    // Let every transfer in flight finish before the buffers can be reused or freed.
    for (size_t s = 0; s < slots; ++s) {
      for (auto* list : {&reads[s], &writes[s]}) {
        for (auto& t : *list) {
          try {
            aio_->wait(t);
          } catch (const IoError&) {
          }
        }
      }
    }
    throw;
  }
}

}  // namespace deepshard::offload
