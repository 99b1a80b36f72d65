// AtomicFile: writes a file as `<path>.tmp`, then fsync + rename onto `path` on commit(), so a
// reader never sees a half-written file. Destroyed without commit(), it removes the .tmp file.
#pragma once

#include <cstddef>
#include <string>

namespace deepshard::checkpoint {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // opens <path>.tmp for writing (IoError if it can't)
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void commit();  // fsync, close, rename <path>.tmp -> path

 private:
  std::string path_, tmp_path_;
  int fd_ = -1;
};

}  // namespace deepshard::checkpoint
