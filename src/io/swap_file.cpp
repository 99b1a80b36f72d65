// SwapFile and SwapDir (swap_file.h): O_DIRECT files, preallocated; the per-run, per-rank folder
// with its checks, stale-file replacement, lock and removal.
#include "io/swap_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "deepshard/util/error.h"
#include "io/aio_options.h"
#include "util/log.h"

namespace deepshard::io {
namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::string gib(int64_t bytes) {
  return deepshard::detail::concat(static_cast<double>(bytes) / (1024.0 * 1024 * 1024), " GiB");
}

}  // namespace

SwapFile::SwapFile(std::string path, int64_t bytes) : path_(std::move(path)), size_(bytes) {
  DS_CHECK(bytes >= 0 && bytes % kIoAlignment == 0, IoError, "swap file ", path_, ": size ", bytes,
           " is not a multiple of ", kIoAlignment);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    const int err = errno;
    DS_CHECK(err != EINVAL, IoError, "swap file ", path_,
             ": the filesystem refuses direct I/O (O_DIRECT; ramfs, or tmpfs before Linux 6.6): "
             "choose an nvme_path on a disk filesystem (ext4, xfs)");
    throw IoError(
        deepshard::detail::concat("swap file ", path_, ": cannot create: ", errno_text(err)));
  }
  if (bytes == 0) return;
  // Reserve the space now: a full disk is an error here, before training, not a failed write later.
  int rc = ::posix_fallocate(fd_, 0, bytes);
  if (rc == EOPNOTSUPP || rc == EINVAL) rc = ::ftruncate(fd_, bytes) == 0 ? 0 : errno;
  if (rc != 0) {
    const int64_t free = free_bytes(fs::path(path_).parent_path().string());
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    throw IoError(deepshard::detail::concat("swap file ", path_, ": cannot reserve ", bytes,
                                            " bytes (", gib(bytes), "; ", free,
                                            " bytes free): ", errno_text(rc)));
  }
}

SwapFile::~SwapFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t free_bytes(const std::string& path) {
  struct statvfs st {};
  DS_CHECK(::statvfs(path.c_str(), &st) == 0, IoError, "statvfs ", path, ": ", errno_text(errno));
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

SwapDir::SwapDir(const std::string& root, const std::string& run, int rank, int64_t needed_bytes) {
  std::error_code ec;
  DS_CHECK(!root.empty(), IoError, "nvme_path is empty: it must name a folder for the swap files");
  DS_CHECK(fs::is_directory(root, ec), IoError, "nvme_path ", root,
           ": no such folder (create it, on a disk with ", needed_bytes, " bytes (",
           gib(needed_bytes), ") free)");
  DS_CHECK(::access(root.c_str(), W_OK | X_OK) == 0, IoError, "nvme_path ", root,
           ": not writable by this process (", errno_text(errno), ")");
  {
    // The filesystem must accept O_DIRECT (tmpfs before Linux 6.6 and ramfs do not): checked
    // first, as such filesystems may also report no free space.
    SwapFile probe(root + "/.deepshard_direct_probe." + std::to_string(::getpid()), 0);
    ::unlink(probe.path().c_str());
  }
  const int64_t free = free_bytes(root);
  DS_CHECK(free >= needed_bytes, IoError, "nvme_path ", root, ": the swap files of rank ", rank,
           " need ", needed_bytes, " bytes (", gib(needed_bytes), "), the filesystem has ", free,
           " bytes (", gib(free), ") free");
  root_ = fs::path(root).lexically_normal().string();
  path_ = (fs::path(root_) / run / ("rank" + std::to_string(rank))).lexically_normal().string();
  fs::create_directories(path_, ec);
  DS_CHECK(!ec, IoError, "nvme_path ", root, ": cannot create ", path_, ": ", ec.message());

  const std::string lock = path_ + "/.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  DS_CHECK(lock_fd_ >= 0, IoError, "swap folder ", path_, ": cannot create ", lock, ": ",
           errno_text(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw IoError(
        deepshard::detail::concat("swap folder ", path_,
                                  " is in use by another running process (a run with the same "
                                  "name and rank): give this run another name or nvme_path"));
  }
  // Whatever else is here was left by a run that crashed: replace it.
  int stale = 0;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (entry.path().filename() == ".lock") continue;
    fs::remove_all(entry.path(), ec);
    ++stale;
  }
  if (stale > 0)
    log::info("swap folder ", path_, ": removed ", stale, " stale files of an earlier run");
}

SwapDir::~SwapDir() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (entry.path().filename() != ".lock") fs::remove_all(entry.path(), ec);
  }
  fs::remove(path_ + "/.lock", ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  // The rank folder, then its parents up to (not including) the root, each only when empty (the
  // other ranks' folders gone too).
  for (fs::path p = path_; p.string().size() > root_.size() && p != p.parent_path();
       p = p.parent_path()) {
    if (!fs::remove(p, ec)) break;
  }
}

std::unique_ptr<SwapFile> SwapDir::create(const std::string& name, int64_t bytes) const {
  return std::make_unique<SwapFile>(path_ + "/" + name, bytes);
}

}  // namespace deepshard::io
