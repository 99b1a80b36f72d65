// AtomicFile: POSIX write + fsync + rename of a checkpoint file.
#include "checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "deepshard/util/error.h"

namespace deepshard::checkpoint {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DS_CHECK(fd_ >= 0, IoError, "cannot create ", tmp_path_, ": ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t size) {
  DS_ASSERT(fd_ >= 0, "write after commit of ", path_);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    DS_CHECK(n > 0, IoError, "cannot write ", tmp_path_, ": ", std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  DS_ASSERT(fd_ >= 0, "double commit of ", path_);
  DS_CHECK(::fsync(fd_) == 0, IoError, "cannot fsync ", tmp_path_, ": ", std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 || std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_path_.c_str());
    throw IoError(
        detail::concat("cannot move ", tmp_path_, " to ", path_, ": ", std::strerror(err)));
  }
}

}  // namespace deepshard::checkpoint
