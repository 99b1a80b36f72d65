// Files for swapping: a SwapFile is one file opened for direct I/O (O_DIRECT), preallocated to its
// size so that a full disk shows at creation, not in the middle of training. A SwapDir is the
// folder of one process's swap files, <root>/<run>/<rank>/: it checks the root (exists, writable,
// accepts O_DIRECT, has the space), replaces the files a crashed run left there, refuses a folder
// that a live process holds (flock), and removes its files when destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace deepshard::io {

class SwapFile {
 public:
  // Creates (truncating) `path` with O_DIRECT and reserves `bytes` (a multiple of kIoAlignment).
  // IoError naming the path: cannot create, the filesystem refuses O_DIRECT, no space.
  SwapFile(std::string path, int64_t bytes);
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  int64_t size() const { return size_; }

 private:
  std::string path_;
  int64_t size_ = 0;
  int fd_ = -1;
};

// Free bytes for an unprivileged writer on the filesystem holding `path` (statvfs).
int64_t free_bytes(const std::string& path);

class SwapDir {
 public:
  // `root`: the user's folder (nvme_path), which must exist. `run`: a relative folder under it
  // (may have several components). `needed_bytes`: what the files will take, checked against the
  // free space before anything is created.
  SwapDir(const std::string& root, const std::string& run, int rank, int64_t needed_bytes);
  ~SwapDir();  // removes the files, the rank folder and its parents under root when empty
  SwapDir(const SwapDir&) = delete;
  SwapDir& operator=(const SwapDir&) = delete;

  const std::string& path() const { return path_; }
  // A new file in this folder (name without directory).
  std::unique_ptr<SwapFile> create(const std::string& name, int64_t bytes) const;

 private:
  std::string root_, path_;
  int lock_fd_ = -1;
};

}  // namespace deepshard::io
