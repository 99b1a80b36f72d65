// Implementation of ShmSegment: shm_open + ftruncate + mmap; errors are CommError naming the
// segment and the system's reason (a full /dev/shm shows up as ENOSPC or a failed ftruncate).
#include "comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace {

constexpr uint64_t kMagic = 0x64736873686d3031ULL;  // "dsshm01"
constexpr size_t kHeaderBytes = (sizeof(ShmHeader) + 4095) / 4096 * 4096;

size_t segment_bytes(int world_size, uint64_t slot_bytes) {
  return kHeaderBytes + static_cast<size_t>(world_size) * 4 * slot_bytes;
}

[[noreturn]] void fail(const std::string& what, const std::string& name) {
  throw CommError(detail::concat("shared-memory segment ", name, ": ", what, " failed: ",
                                 std::strerror(errno)));
}

void* map(int fd, size_t bytes, const std::string& name) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) fail("mmap", name);
  return base;
}

}  // namespace

ShmSegment::ShmSegment(std::string name, void* base, size_t bytes, bool owner)
    : name_(std::move(name)), base_(base), bytes_(bytes), owner_(owner) {}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)), base_(other.base_), bytes_(other.bytes_),
      owner_(other.owner_) {
  other.base_ = nullptr;
  other.owner_ = false;
}

ShmSegment::~ShmSegment() {
  unlink();
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void ShmSegment::unlink() {
  if (!owner_) return;
  ::shm_unlink(name_.c_str());
  owner_ = false;
}

ShmSegment ShmSegment::create(const std::string& tag, int world_size, uint64_t slot_bytes) {
  static std::atomic<int> counter{0};
  const std::string name =
      detail::concat("/deepshard-", tag, "-", ::getpid(), "-", counter.fetch_add(1));
  DS_CHECK(world_size >= 1 && world_size <= kShmMaxRanks, CommError, "shared-memory segment ",
           name, ": ", world_size, " ranks (at most ", kShmMaxRanks, ")");
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail("shm_open", name);
  const size_t bytes = segment_bytes(world_size, slot_bytes);
  // posix_fallocate reserves the pages now, so a full /dev/shm fails here and not as SIGBUS later.
  int rc = ::ftruncate(fd, static_cast<off_t>(bytes));
  if (rc == 0) rc = errno = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    const int saved = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    errno = saved;
    fail(detail::concat("reserving ", bytes >> 20, " MiB"), name);
  }
  void* base = nullptr;
  try {
    base = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw;
  }
  ::close(fd);
  ShmSegment segment(name, base, bytes, true);
  auto* header = new (base) ShmHeader();
  header->magic = kMagic;
  header->world_size = world_size;
  header->slot_bytes = slot_bytes;
  header->wake.store(0);
  header->aborted_by.store(-1);
  for (int r = 0; r < kShmMaxRanks; ++r) {
    header->ranks[r].arrived.store(0);
    header->ranks[r].pid.store(0);
  }
  return segment;
}

ShmSegment ShmSegment::open(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) fail("shm_open", name);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("fstat", name);
  }
  void* base = nullptr;
  try {
    base = map(fd, static_cast<size_t>(st.st_size), name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  ShmSegment segment(name, base, static_cast<size_t>(st.st_size), false);
  const ShmHeader& header = segment.header();
  DS_CHECK(header.magic == kMagic &&
               static_cast<size_t>(st.st_size) ==
                   segment_bytes(header.world_size, header.slot_bytes),
           CommError, "shared-memory segment ", name, " is not a deepshard segment of this version");
  return segment;
}

uint8_t* ShmSegment::slot(int area, int rank, int half) const {
  const uint64_t s = header().slot_bytes;
  const uint64_t n = static_cast<uint64_t>(header().world_size);
  return static_cast<uint8_t*>(base_) + kHeaderBytes + area * n * 2 * s +
         (static_cast<uint64_t>(rank) * 2 + half) * s;
}

}  // namespace deepshard::comm
