// Token files (layout in token_file.h and docs/data.md): atomic writing (temp file, fsync,
// rename, fsync of the directory) and memory-mapped reading with full validation, so a bad file
// fails at open with its path and the problem rather than as garbage tokens during training.
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "deepshard/util/error.h"

namespace deepshard::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; a big-endian host needs byte swapping here");

constexpr char kTokenFileMagic[8] = {'D', 'S', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kTokenFileVersion = 1;
constexpr size_t kHeaderBytes = 64;

struct Header {
  uint32_t version = kTokenFileVersion;
  uint32_t bytes_per_token = 2;
  uint64_t count = 0;
  uint64_t vocab_size = 0;
};

void encode_header(const Header& h, uint8_t* out) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kTokenFileMagic, sizeof kTokenFileMagic);
  std::memcpy(out + 8, &h.version, 4);
  std::memcpy(out + 12, &h.bytes_per_token, 4);
  std::memcpy(out + 16, &h.count, 8);
  std::memcpy(out + 24, &h.vocab_size, 8);
}

Header decode_header(const uint8_t* in) {
  Header h;
  std::memcpy(&h.version, in + 8, 4);
  std::memcpy(&h.bytes_per_token, in + 12, 4);
  std::memcpy(&h.count, in + 16, 8);
  std::memcpy(&h.vocab_size, in + 24, 8);
  return h;
}

std::string errno_text() { return std::strerror(errno); }

// Owns a file descriptor for the writer.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void write_all(int fd, const uint8_t* data, size_t bytes, const std::string& path) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    DS_CHECK(n > 0, IoError, path, ": write failed: ", errno_text());
    data += n;
    bytes -= static_cast<size_t>(n);
  }
}

void fsync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DS_CHECK(fd.get() >= 0, IoError, dir.string(), ": cannot open directory to sync: ", errno_text());
  DS_CHECK(::fsync(fd.get()) == 0, IoError, dir.string(), ": fsync failed: ", errno_text());
}

// Index of the first token >= limit, or -1.
template <typename T>
int64_t first_out_of_range(const uint8_t* data, int64_t count, uint64_t limit) {
  const T* tokens = reinterpret_cast<const T*>(data);  // 64-byte offset into a page: aligned
  for (int64_t i = 0; i < count; ++i)
    if (tokens[i] >= limit) return i;
  return -1;
}

}  // namespace

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens,
                      int64_t vocab_size) {
  DS_CHECK(vocab_size > 0 && vocab_size <= 65536, IoError, path, ": vocabulary size ", vocab_size,
           " does not fit uint16 tokens (1..65536)");
  for (size_t i = 0; i < tokens.size(); ++i) {
    DS_CHECK(tokens[i] < vocab_size, IoError, path, ": token ", tokens[i], " at index ", i,
             " is outside the vocabulary (", vocab_size, ")");
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  DS_CHECK(!ec, IoError, parent.string(), ": cannot create directory: ", ec.message());

  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  DS_CHECK(fd.get() >= 0, IoError, temp, ": cannot create: ", errno_text());
  try {
    Header h;
    h.count = tokens.size();
    h.vocab_size = static_cast<uint64_t>(vocab_size);
    uint8_t header[kHeaderBytes];
    encode_header(h, header);
    write_all(fd.get(), header, kHeaderBytes, temp);
    write_all(fd.get(), reinterpret_cast<const uint8_t*>(tokens.data()),
              tokens.size() * sizeof(uint16_t), temp);
    DS_CHECK(::fsync(fd.get()) == 0, IoError, temp, ": fsync failed: ", errno_text());
    DS_CHECK(::close(fd.release()) == 0, IoError, temp, ": close failed: ", errno_text());
    DS_CHECK(::rename(temp.c_str(), path.c_str()) == 0, IoError, path,
             ": cannot rename the temporary file into place: ", errno_text());
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  fsync_directory_of(path);
}

TokenFile::TokenFile(const std::string& path, int64_t model_vocab_size) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0 && errno == ENOENT) throw IoError(path + ": no such file");
  DS_CHECK(fd_ >= 0, IoError, path, ": cannot open: ", errno_text());
  try {
    struct stat st {};
    DS_CHECK(::fstat(fd_, &st) == 0, IoError, path, ": cannot stat: ", errno_text());
    DS_CHECK(S_ISREG(st.st_mode), IoError, path, ": not a regular file");
    DS_CHECK(st.st_size > 0, IoError, path, ": empty");
    map_bytes_ = static_cast<size_t>(st.st_size);
    void* map = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd_, 0);
    DS_CHECK(map != MAP_FAILED, IoError, path, ": mmap failed: ", errno_text());
    map_ = static_cast<const uint8_t*>(map);

    bool magic_ok = map_bytes_ >= sizeof kTokenFileMagic &&
                    std::memcmp(map_, kTokenFileMagic, sizeof kTokenFileMagic) == 0;
    DS_CHECK(magic_ok, IoError, path, ": not a deepshard token file (bad magic)");
    DS_CHECK(map_bytes_ >= kHeaderBytes, IoError, path, ": truncated: the header needs ",
             kHeaderBytes, " bytes but the file has ", map_bytes_);
    Header h = decode_header(map_);
    DS_CHECK(h.version == kTokenFileVersion, IoError, path, ": unsupported format version ",
             h.version, " (this build reads version ", kTokenFileVersion, ")");
    DS_CHECK(h.bytes_per_token == 2 || h.bytes_per_token == 4, IoError, path, ": bad token dtype ",
             h.bytes_per_token, " (expected 2 = uint16 or 4 = uint32)");
    const uint64_t max_vocab = uint64_t{1} << (8 * h.bytes_per_token);
    DS_CHECK(h.vocab_size > 0 && h.vocab_size <= max_vocab, IoError, path, ": bad vocabulary size ",
             h.vocab_size, " for ", h.bytes_per_token, "-byte tokens");
    const uint64_t data_bytes = map_bytes_ - kHeaderBytes;
    const uint64_t bpt = h.bytes_per_token;
    DS_CHECK(h.count <= data_bytes / bpt, IoError, path, ": truncated: header says ", h.count,
             " tokens (", h.count * bpt, " bytes) but the file has ", data_bytes,
             " bytes of tokens");
    DS_CHECK(h.count * bpt == data_bytes, IoError, path, ": size mismatch: header says ", h.count,
             " tokens (", h.count * bpt, " bytes) but the file has ", data_bytes,
             " bytes of tokens");
    DS_CHECK(h.count > 0, IoError, path, ": empty (the header says 0 tokens)");
    count_ = static_cast<int64_t>(h.count);
    vocab_size_ = static_cast<int64_t>(h.vocab_size);
    bytes_per_token_ = static_cast<int>(h.bytes_per_token);

    const bool model_limits = model_vocab_size > 0 && model_vocab_size < vocab_size_;
    const uint64_t limit = model_limits ? model_vocab_size : vocab_size_;
    const uint8_t* data = map_ + kHeaderBytes;
    int64_t bad = bytes_per_token_ == 2 ? first_out_of_range<uint16_t>(data, count_, limit)
                                        : first_out_of_range<uint32_t>(data, count_, limit);
    DS_CHECK(bad < 0, IoError, path, ": token ", token(bad), " at index ", bad, " is outside the ",
             model_limits ? "model's " : "", "vocabulary (", limit, ")");
  } catch (...) {
    if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
    ::close(fd_);
    throw;
  }
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

int64_t TokenFile::token(int64_t i) const {
  DS_ASSERT(i >= 0 && i < count_, path_, ": token index ", i, " of ", count_);
  const uint8_t* p = map_ + kHeaderBytes + static_cast<size_t>(i) * bytes_per_token_;
  if (bytes_per_token_ == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void TokenFile::read(int64_t start, int64_t n, int64_t* out) const {
  DS_ASSERT(start >= 0 && n >= 0 && start + n <= count_, path_, ": tokens [", start, ", ",
            start + n, ") of ", count_);
  const uint8_t* data = map_ + kHeaderBytes;
  if (bytes_per_token_ == 2) {
    const auto* tokens = reinterpret_cast<const uint16_t*>(data) + start;
    for (int64_t i = 0; i < n; ++i) out[i] = tokens[i];
  } else {
    const auto* tokens = reinterpret_cast<const uint32_t*>(data) + start;
    for (int64_t i = 0; i < n; ++i) out[i] = tokens[i];
  }
}

}  // namespace deepshard::data
