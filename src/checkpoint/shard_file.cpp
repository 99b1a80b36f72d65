// Shard file encoding (little-endian records with CRC32) and its verifying decoder.
#include "checkpoint/shard_file.h"

#include <ATen/ATen.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "checkpoint/atomic_file.h"
#include "checkpoint/crc32.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little, "shard files are little endian");

constexpr uint32_t kMaxNameBytes = 1 << 16;
constexpr uint32_t kMaxDims = 64;

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

// Bounds-checked cursor over the file's bytes; errors name the file and what was being read.
class Cursor {
 public:
  Cursor(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}

  void set_context(std::string context) { context_ = std::move(context); }
  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }

  const char* take(size_t n) {
    DS_CHECK(n <= bytes_.size() - pos_, IoError, path_, ": truncated file (", bytes_.size(),
             " bytes): ", context_, " needs ", n, " bytes at offset ", pos_);
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  [[noreturn]] void corrupt(const std::string& what) const {
    throw IoError(detail::concat(path_, ": corrupt file: ", context_, ": ", what));
  }
  void check_crc(size_t begin, uint32_t stored) const {
    const uint32_t computed = crc32(bytes_.data() + begin, pos_ - 4 - begin);
    if (computed != stored)
      corrupt(detail::concat("CRC32 mismatch (stored 0x", std::hex, stored, ", computed 0x",
                             computed, ")"));
  }

 private:
  const std::string& path_;
  const std::string& bytes_;
  std::string context_ = "header";
  size_t pos_ = 0;
};

std::pair<std::string, at::Tensor> read_tensor(Cursor& in, size_t index) {
  const size_t begin = in.pos();
  in.set_context(detail::concat("tensor #", index));
  const auto name_size = in.get<uint32_t>();
  if (name_size > kMaxNameBytes) in.corrupt(detail::concat("name length ", name_size));
  const std::string name(in.take(name_size), name_size);
  in.set_context(detail::concat("tensor '", name, "' (#", index, ")"));
  const auto code = in.get<uint8_t>();
  if (code != 1 && code != 2) in.corrupt(detail::concat("unknown dtype code ", int(code)));
  const at::ScalarType dtype = code == 1 ? at::kFloat : at::kBFloat16;
  const auto ndim = in.get<uint32_t>();
  if (ndim > kMaxDims) in.corrupt(detail::concat(ndim, " dimensions"));
  std::vector<int64_t> shape(ndim);
  uint64_t numel = 1;
  for (auto& d : shape) {
    d = in.get<int64_t>();
    if (d < 0) in.corrupt(detail::concat("negative dimension ", d));
    numel *= static_cast<uint64_t>(d);
  }
  const auto nbytes = in.get<uint64_t>();
  if (nbytes != numel * c10::elementSize(dtype))
    in.corrupt(detail::concat(nbytes, " data bytes for ", numel, " elements"));
  const char* data = in.take(nbytes);
  in.check_crc(begin, in.get<uint32_t>());
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  std::memcpy(t.data_ptr(), data, nbytes);
  return {name, t};
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

ShardFile read_shard_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  DS_CHECK(stream, IoError, "cannot open shard file ", path);
  const std::string bytes{std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
  DS_CHECK(!stream.bad(), IoError, "cannot read shard file ", path);

  Cursor in(path, bytes);
  DS_CHECK(bytes.size() >= sizeof kShardMagic &&
               std::memcmp(bytes.data(), kShardMagic, sizeof kShardMagic) == 0,
           IoError, path, ": not a deepshard shard file (bad magic)");
  in.take(sizeof kShardMagic);
  const auto version = in.get<uint32_t>();
  ShardFile shard;
  shard.rank = in.get<uint32_t>();
  shard.world_size = in.get<uint32_t>();
  const auto count = in.get<uint32_t>();
  in.check_crc(0, in.get<uint32_t>());
  DS_CHECK(version == kShardFormatVersion, IoError, path, ": shard format version ", version,
           "; this build reads version ", kShardFormatVersion);
  for (uint32_t i = 0; i < count; ++i) {
    shard.tensors.push_back(read_tensor(in, i));
  }
  in.set_context("end of file");
  if (!in.at_end()) in.corrupt(detail::concat(bytes.size() - in.pos(), " trailing bytes"));
  return shard;
}

}  // namespace deepshard::checkpoint
