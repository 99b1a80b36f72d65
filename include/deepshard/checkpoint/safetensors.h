// Hugging Face safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}} and the raw
// little-endian tensor bytes. Dtypes F32, F16, BF16, F64, I64, I32, I16, I8, U8 and BOOL. Tensors are written contiguous, sorted
// by name (as the reference implementation does); reading validates the whole header against the
// file and throws IoError naming the file, the problem and the tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace deepshard::checkpoint {

using TensorMap = std::map<std::string, at::Tensor>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsContent {
  TensorMap tensors;  // CPU tensors in the file's dtypes
  Metadata metadata;  // "__metadata__", empty if absent
};

// Writes `tensors` (any device; one of the dtypes above) to `path` atomically (via
// <path>.tmp + rename).
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata = {});

// Reads and validates a whole safetensors file.
SafetensorsContent load_safetensors(const std::string& path);

}  // namespace deepshard::checkpoint
