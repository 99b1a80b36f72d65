// safetensors reader and writer: header JSON (nlohmann), dtype names, validation of offsets
// against shapes and the file size.
#include "deepshard/checkpoint/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little endian");

// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// The dtypes deepshard reads and writes, by their safetensors names (the integer and bool ones
// for module buffers).
constexpr std::pair<const char*, at::ScalarType> kDtypes[] = {
    {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16}, {"F64", at::kDouble},
    {"I64", at::kLong},  {"I32", at::kInt},   {"I16", at::kShort},     {"I8", at::kChar},
    {"U8", at::kByte},   {"BOOL", at::kBool}};

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& [n, t] : kDtypes)
    if (name == n) return t;
  return std::nullopt;
}

std::string dtype_name(at::ScalarType type) {
  for (const auto& [n, t] : kDtypes)
    if (type == t) return n;
  return "";
}

// One header entry, validated against the data section.
struct Entry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j,
                  uint64_t data_size) {
  const auto where = [&] { return detail::concat(path, ": tensor '", name, "': "); };
  DS_CHECK(j.is_object(), IoError, where(), "header entry is not an object");
  DS_CHECK(j.contains("dtype") && j["dtype"].is_string(), IoError, where(), "missing dtype");
  const std::string dtype = j["dtype"].get<std::string>();
  const auto type = dtype_from_name(dtype);
  DS_CHECK(type, IoError, where(), "unsupported dtype '", dtype,
           "' (deepshard reads F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
  Entry e{name, *type, {}, 0, 0};
  DS_CHECK(j.contains("shape") && j["shape"].is_array(), IoError, where(), "missing shape");
  uint64_t numel = 1;
  for (const auto& d : j["shape"]) {
    DS_CHECK(d.is_number_unsigned(), IoError, where(), "shape entry ", d.dump(),
             " is not a non-negative integer");
    e.shape.push_back(d.get<int64_t>());
    numel *= d.get<uint64_t>();
  }
  const auto& off = j.contains("data_offsets") ? j["data_offsets"] : nlohmann::json();
  DS_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
               off[1].is_number_unsigned(),
           IoError, where(), "data_offsets must be [begin, end]");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  DS_CHECK(e.begin <= e.end, IoError, where(), "data_offsets [", e.begin, ", ", e.end,
           "] end before begin");
  DS_CHECK(e.end <= data_size, IoError, where(), "data_offsets [", e.begin, ", ", e.end,
           "] beyond the data section of ", data_size, " bytes (short file?)");
  const uint64_t expected = numel * c10::elementSize(*type);
  DS_CHECK(e.end - e.begin == expected, IoError, where(), "data_offsets [", e.begin, ", ", e.end,
           "] hold ", e.end - e.begin, " bytes but shape x ", dtype, " needs ", expected);
  return e;
}

}  // namespace

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;  // contiguous CPU tensors in name order
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    DS_CHECK(name != "__metadata__", IoError, path, ": '__metadata__' is not a tensor name");
    const std::string dtype = dtype_name(tensor.scalar_type());
    DS_CHECK(!dtype.empty(), IoError, path, ": tensor '", name, "' has dtype ",
             tensor.scalar_type(), "; safetensors writing supports F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL");
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = t.numel() * t.element_size();
    header[name] = {
        {"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(t));
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // pad so the data section is 8-byte aligned
  const uint64_t header_size = json.size();

  AtomicFile file(path);
  file.write(&header_size, sizeof header_size);
  file.write(json.data(), json.size());
  for (const auto& t : data) file.write(t.data_ptr(), t.numel() * t.element_size());
  file.commit();
}

SafetensorsContent load_safetensors(const std::string& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  DS_CHECK(!ec, IoError, "cannot read safetensors file ", path, ": ", ec.message());
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in, IoError, "cannot open safetensors file ", path);
  DS_CHECK(file_size >= 8, IoError, path, ": short file (", file_size,
           " bytes) without an 8-byte header length");
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), sizeof header_size);
  DS_CHECK(header_size <= kMaxHeaderBytes, IoError, path, ": header length ", header_size,
           " exceeds the 100 MB limit");
  DS_CHECK(8 + header_size <= file_size, IoError, path, ": header length ", header_size,
           " goes beyond the end of the file (", file_size, " bytes)");
  std::string json(header_size, '\0');
  in.read(json.data(), static_cast<std::streamsize>(header_size));
  DS_CHECK(in, IoError, "cannot read the header of ", path);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    throw IoError(detail::concat(path, ": header is not valid JSON: ", e.what()));
  }
  DS_CHECK(header.is_object(), IoError, path, ": header is not a JSON object");

  SafetensorsContent content;
  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = file_size - data_start;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      DS_CHECK(value.is_object(), IoError, path, ": __metadata__ is not an object");
      for (const auto& [key, v] : value.items()) {
        DS_CHECK(v.is_string(), IoError, path, ": __metadata__['", key, "'] is not a string");
        content.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, value, data_size));
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  for (size_t i = 1; i < entries.size(); ++i) {
    const Entry& prev = entries[i - 1];
    DS_CHECK(entries[i].begin >= prev.end, IoError, path, ": tensor '", entries[i].name,
             "' data_offsets [", entries[i].begin, ", ", entries[i].end, "] overlap tensor '",
             prev.name, "' [", prev.begin, ", ", prev.end, "]");
  }

  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    DS_CHECK(in, IoError, path, ": cannot read the data of tensor '", e.name, "'");
    content.tensors.emplace(e.name, std::move(t));
  }
  return content;
}

}  // namespace deepshard::checkpoint
