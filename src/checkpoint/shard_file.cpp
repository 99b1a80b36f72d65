// Shard file encoding (little-endian records with CRC32), its indexing reader and verifying
// decoder.
#include "checkpoint/shard_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <set>

#include "checkpoint/atomic_file.h"
#include "checkpoint/crc32.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little, "shard files are little endian");

constexpr uint32_t kMaxNameBytes = 1 << 16;
constexpr uint32_t kMaxDims = 64;
constexpr size_t kHeaderBytes = sizeof kShardMagic + 5 * 4;

uint8_t dtype_code(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return 1;
    case at::kBFloat16:
      return 2;
    default:
      return 0;
  }
}

template <typename T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Reads exactly `n` bytes at `offset` (the caller checked the bounds).
void pread_all(int fd, const std::string& path, void* out, size_t n, uint64_t offset) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    DS_CHECK(got > 0, IoError, "cannot read ", path, ": ",
             got < 0 ? std::strerror(errno) : "unexpected end of file");
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

// Bounds-checked cursor over the file; errors name the file and what was being read. Metadata is
// read through it; data is skipped (read later, per record).
class Cursor {
 public:
  Cursor(const std::string& path, int fd, uint64_t size) : path_(path), fd_(fd), size_(size) {}

  void set_context(std::string context) { context_ = std::move(context); }
  uint64_t pos() const { return pos_; }
  bool at_end() const { return pos_ == size_; }

  // The next n bytes (appended to the bytes seen since the last mark, for the CRC).
  std::string take(uint64_t n) {
    need(n);
    std::string out(n, '\0');
    pread_all(fd_, path_, out.data(), n, pos_);
    pos_ += n;
    seen_ += out;
    return out;
  }
  void skip(uint64_t n) {
    need(n);
    pos_ += n;
  }
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value).data(), sizeof value);
    return value;
  }
  void mark() { seen_.clear(); }
  const std::string& seen() const { return seen_; }
  [[noreturn]] void corrupt(const std::string& what) const {
    throw IoError(detail::concat(path_, ": corrupt file: ", context_, ": ", what));
  }

 private:
  void need(uint64_t n) const {
    DS_CHECK(n <= size_ - pos_, IoError, path_, ": truncated file (", size_, " bytes): ", context_,
             " needs ", n, " bytes at offset ", pos_);
  }
  const std::string& path_;
  int fd_;
  uint64_t size_;
  std::string context_ = "header";
  std::string seen_;
  uint64_t pos_ = 0;
};

void check_crc(const std::string& path, const std::string& context, uint32_t computed,
               uint32_t stored) {
  if (computed != stored)
    throw IoError(detail::concat(path, ": corrupt file: ", context, ": CRC32 mismatch (stored 0x",
                                 std::hex, stored, ", computed 0x", computed, ")"));
}

std::string record_context(const std::string& name, size_t index) {
  return detail::concat("tensor '", name, "' (#", index, ")");
}

ShardReader::Record index_record(Cursor& in, size_t index) {
  ShardReader::Record r;
  r.begin = in.pos();
  in.mark();
  in.set_context(detail::concat("tensor #", index));
  const auto name_size = in.get<uint32_t>();
  if (name_size > kMaxNameBytes) in.corrupt(detail::concat("name length ", name_size));
  r.name = in.take(name_size);
  in.set_context(record_context(r.name, index));
  const auto code = in.get<uint8_t>();
  if (code != 1 && code != 2) in.corrupt(detail::concat("unknown dtype code ", int(code)));
  r.dtype = code == 1 ? at::kFloat : at::kBFloat16;
  const auto ndim = in.get<uint32_t>();
  if (ndim > kMaxDims) in.corrupt(detail::concat(ndim, " dimensions"));
  r.shape.resize(ndim);
  uint64_t numel = 1;
  for (auto& d : r.shape) {
    d = in.get<int64_t>();
    if (d < 0) in.corrupt(detail::concat("negative dimension ", d));
    numel *= static_cast<uint64_t>(d);
  }
  r.nbytes = in.get<uint64_t>();
  if (r.nbytes != numel * c10::elementSize(r.dtype))
    in.corrupt(detail::concat(r.nbytes, " data bytes for ", numel, " elements"));
  r.data_offset = in.pos();
  in.skip(r.nbytes);
  in.skip(4);  // the CRC, checked when the record is read
  return r;
}

}  // namespace

void write_shard_file(const std::string& path, const ShardFile& shard) {
  std::string header(kShardMagic, sizeof kShardMagic);
  append<uint32_t>(header, kShardFormatVersion);
  append<uint32_t>(header, static_cast<uint32_t>(shard.rank));
  append<uint32_t>(header, static_cast<uint32_t>(shard.world_size));
  append<uint32_t>(header, static_cast<uint32_t>(shard.tensors.size()));
  append<uint32_t>(header, crc32(header.data(), header.size()));

  AtomicFile file(path);
  file.write(header.data(), header.size());
  std::set<std::string> names;
  for (const auto& [name, tensor] : shard.tensors) {
    DS_CHECK(names.insert(name).second, IoError, path, ": duplicate tensor name '", name, "'");
    const uint8_t code = dtype_code(tensor.scalar_type());
    DS_CHECK(code != 0, IoError, path, ": tensor '", name, "' has dtype ", tensor.scalar_type(),
             "; shard files hold float32 and bfloat16");
    const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t nbytes = t.numel() * t.element_size();
    std::string meta;
    append<uint32_t>(meta, static_cast<uint32_t>(name.size()));
    meta += name;
    append<uint8_t>(meta, code);
    append<uint32_t>(meta, static_cast<uint32_t>(t.dim()));
    for (int64_t d : t.sizes()) append<int64_t>(meta, d);
    append<uint64_t>(meta, nbytes);
    const uint32_t crc = crc32(t.data_ptr(), nbytes, crc32(meta.data(), meta.size()));
    file.write(meta.data(), meta.size());
    file.write(t.data_ptr(), nbytes);
    file.write(&crc, sizeof crc);
  }
  file.commit();
}

ShardReader::ShardReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  DS_CHECK(fd_ >= 0, IoError, "cannot open shard file ", path_, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    ::close(fd_);
    throw IoError(detail::concat("cannot stat shard file ", path_, ": ", std::strerror(errno)));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  try {
    Cursor in(path_, fd_, size_);
    char magic[sizeof kShardMagic] = {};
    if (size_ >= sizeof magic) pread_all(fd_, path_, magic, sizeof magic, 0);
    DS_CHECK(size_ >= sizeof magic && std::memcmp(magic, kShardMagic, sizeof magic) == 0, IoError,
             path_, ": not a deepshard shard file (bad magic)");
    in.take(sizeof kShardMagic);
    const auto version = in.get<uint32_t>();
    rank_ = in.get<uint32_t>();
    world_size_ = in.get<uint32_t>();
    const auto count = in.get<uint32_t>();
    const std::string header = in.seen();
    check_crc(path_, "header", crc32(header.data(), header.size()), in.get<uint32_t>());
    DS_CHECK(version == kShardFormatVersion, IoError, path_, ": shard format version ", version,
             "; this build reads version ", kShardFormatVersion);
    static_assert(kHeaderBytes == 28);
    for (uint32_t i = 0; i < count; ++i) records_.push_back(index_record(in, i));
    in.set_context("end of file");
    if (!in.at_end()) in.corrupt(detail::concat(size_ - in.pos(), " trailing bytes"));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

at::Tensor ShardReader::read(size_t index) const {
  DS_ASSERT(index < records_.size(), "no record ", index, " in ", path_);
  const Record& r = records_[index];
  std::string meta(r.data_offset - r.begin, '\0');
  pread_all(fd_, path_, meta.data(), meta.size(), r.begin);
  at::Tensor t = at::empty(r.shape, at::TensorOptions().dtype(r.dtype));
  pread_all(fd_, path_, t.data_ptr(), r.nbytes, r.data_offset);
  uint32_t stored = 0;
  pread_all(fd_, path_, &stored, sizeof stored, r.data_offset + r.nbytes);
  check_crc(path_, record_context(r.name, index),
            crc32(t.data_ptr(), r.nbytes, crc32(meta.data(), meta.size())), stored);
  return t;
}

ShardFile read_shard_file(const std::string& path) {
  ShardReader reader(path);
  ShardFile shard;
  shard.rank = reader.rank();
  shard.world_size = reader.world_size();
  for (size_t i = 0; i < reader.records().size(); ++i)
    shard.tensors.emplace_back(reader.records()[i].name, reader.read(i));
  return shard;
}

}  // namespace deepshard::checkpoint
