// An engine checkpoint on disk (one tag directory, docs/checkpoint.md): manifest.json (format
// version, world size, stage, config, parameter table, engine and client state, RNG states) and
// one shard file per saving rank, rank_XXXXX, whose records are element ranges of flattened
// parameters: "<name>[<begin>:<end>]/<kind>" with kind fp32 (master weights), exp_avg or
// exp_avg_sq. CheckpointReader opens and indexes every shard file up front (missing files,
// truncation, headers of another rank or world size and incomplete coverage of a parameter are
// errors naming the file), then assembles any element range of any parameter from whichever files
// hold its pieces, reading only those records and verifying their CRCs. Engines load through it at
// any world size and stage (resharding on load); `deepshard convert` and `generate --checkpoint`
// read consolidated weights from it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace deepshard::checkpoint {

class ShardReader;
class CheckpointReader;

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr const char* kManifestName = "manifest.json";

enum class StateKind { kFp32, kExpAvg, kExpAvgSq };
inline constexpr StateKind kStateKinds[] = {StateKind::kFp32, StateKind::kExpAvg,
                                            StateKind::kExpAvgSq};
const char* to_string(StateKind kind);  // "fp32", "exp_avg", "exp_avg_sq"

// "rank_00003".
std::string shard_file_name(int64_t rank);
// "h.0.attn.c_attn.weight[0:4096]/exp_avg".
std::string record_name(const std::string& param, int64_t begin, int64_t end, StateKind kind);

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;  // the model's dtype when saved ("float32", "bfloat16", "float16")
  // How the saving run split it over its tensor ranks (tensor_slice.h; informational: records are
  // ranges of the whole parameter whatever the split): dimension (-1 whole) and blocks along it.
  int split_dim = -1;
  int split_blocks = 1;
  int64_t numel() const;
};

// A parameter table entry as manifest.json holds it ({"name", "shape", "dtype"} and, when split,
// "tensor_split": {"dim", "blocks"}), and back (nlohmann::json exceptions on a malformed entry).
nlohmann::json param_to_json(const ParamInfo& p);
ParamInfo param_from_json(const nlohmann::json& j);

// One record to write: elements [begin, end) of a parameter's `kind` state (fp32, 1-D).
struct StateRecord {
  std::string param;
  int64_t begin = 0, end = 0;
  StateKind kind = StateKind::kFp32;
  at::Tensor values;
};
// Writes <tag_dir>/rank_XXXXX (atomically, fsynced).
void write_rank_shard(const std::string& tag_dir, int rank, int world_size,
                      const std::vector<StateRecord>& records);
// Writes <tag_dir>/manifest.json (atomically, fsynced).
void write_manifest(const std::string& tag_dir, const nlohmann::json& manifest);

// The tag directory of `tag` in `dir`; "" = the tag named by <dir>/latest (IoError if none).
std::string resolve_tag(const std::string& dir, const std::string& tag);

class CheckpointReader {
 public:
  explicit CheckpointReader(std::string tag_dir);
  ~CheckpointReader();

  const std::string& path() const { return dir_; }
  const nlohmann::json& manifest() const { return manifest_; }
  const std::vector<ParamInfo>& parameters() const { return params_; }
  int world_size() const { return world_size_; }
  int zero_stage() const { return manifest_.at("zero_stage").get<int>(); }

  // Elements [begin, end) of the flattened parameter's `kind` state, fp32 [end - begin].
  at::Tensor read_range(const std::string& param, StateKind kind, int64_t begin, int64_t end) const;
  // The element ranges `ranges` (increasing, disjoint) of the parameter's `kind` state,
  // concatenated: fp32 [sum of their lengths]. Each record overlapping them is read once (a
  // tensor-parallel slice is many short ranges of the whole parameter).
  at::Tensor read_ranges(const std::string& param, StateKind kind,
                         const std::vector<std::pair<int64_t, int64_t>>& ranges) const;
  // Every parameter's fp32 master weights, full and shaped, by name.
  std::map<std::string, at::Tensor> consolidated_weights() const;
  // The client state saved with the checkpoint (a JSON object; the trainer's has "step" and
  // "model", the model section of the run).
  const nlohmann::json& client_state() const { return manifest_.at("client_state"); }

 private:
  struct Piece {
    int64_t begin = 0, end = 0;
    size_t file = 0, record = 0;
  };
  const ParamInfo& param(const std::string& name) const;

  std::string dir_;
  nlohmann::json manifest_;
  int world_size_ = 0;
  std::vector<ParamInfo> params_;
  std::vector<std::unique_ptr<ShardReader>> files_;
  // (parameter, kind) -> pieces sorted by begin, covering [0, numel) without overlap.
  std::map<std::pair<std::string, StateKind>, std::vector<Piece>> pieces_;
};

// Copies the checkpoint's consolidated fp32 weights into `params` (by name; converted to each
// parameter's dtype). A missing parameter or a shape mismatch is an IoError naming the checkpoint.
void load_consolidated_weights(const CheckpointReader& reader,
                               const std::map<std::string, at::Tensor>& params);

}  // namespace deepshard::checkpoint
