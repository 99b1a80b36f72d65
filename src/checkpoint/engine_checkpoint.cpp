// Engine checkpoints on disk: record names, shard and manifest writing, CheckpointReader
// (engine_checkpoint.h).
#include "deepshard/checkpoint/engine_checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/atomic_file.h"
#include "checkpoint/shard_file.h"
#include "checkpoint/tag_directory.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

namespace fs = std::filesystem;

// Parses "<name>[<begin>:<end>]/<kind>"; false if the name is not of that form.
bool parse_record_name(const std::string& record, std::string& param, int64_t& begin, int64_t& end,
                       StateKind& kind) {
  const size_t slash = record.rfind('/');
  const size_t open = record.rfind('[', slash);
  if (slash == std::string::npos || open == std::string::npos || slash == 0 ||
      record[slash - 1] != ']')
    return false;
  const std::string suffix = record.substr(slash + 1);
  bool known = false;
  for (StateKind k : kStateKinds) {
    if (suffix == to_string(k)) {
      kind = k;
      known = true;
    }
  }
  if (!known) return false;
  long long b = 0, e = 0;
  char tail = 0;
  const std::string range = record.substr(open, slash - open);
  if (std::sscanf(range.c_str(), "[%lld:%lld%c", &b, &e, &tail) != 3 || tail != ']') return false;
  param = record.substr(0, open);
  begin = b;
  end = e;
  return begin >= 0 && begin < end;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

const char* to_string(StateKind kind) {
  switch (kind) {
    case StateKind::kFp32:
      return "fp32";
    case StateKind::kExpAvg:
      return "exp_avg";
    case StateKind::kExpAvgSq:
      return "exp_avg_sq";
  }
  return "?";
}

std::string shard_file_name(int64_t rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05lld", static_cast<long long>(rank));
  return name;
}

std::string record_name(const std::string& param, int64_t begin, int64_t end, StateKind kind) {
  return param + "[" + std::to_string(begin) + ":" + std::to_string(end) + "]/" + to_string(kind);
}

void write_rank_shard(const std::string& tag_dir, int rank, int world_size,
                      const std::vector<StateRecord>& records) {
  ShardFile shard;
  shard.rank = rank;
  shard.world_size = world_size;
  for (const auto& r : records) {
    DS_ASSERT(r.values.scalar_type() == at::kFloat && r.values.numel() == r.end - r.begin,
              "record ", record_name(r.param, r.begin, r.end, r.kind));
    shard.tensors.emplace_back(record_name(r.param, r.begin, r.end, r.kind), r.values);
  }
  write_shard_file((fs::path(tag_dir) / shard_file_name(rank)).string(), shard);
}

void write_manifest(const std::string& tag_dir, const nlohmann::json& manifest) {
  const std::string text = manifest.dump(1) + "\n";
  AtomicFile file((fs::path(tag_dir) / kManifestName).string());
  file.write(text.data(), text.size());
  file.commit();
}

int64_t ParamInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

nlohmann::json param_to_json(const ParamInfo& p) {
  nlohmann::json out = {{"name", p.name}, {"shape", p.shape}, {"dtype", p.dtype}};
  if (p.split_dim >= 0) out["tensor_split"] = {{"dim", p.split_dim}, {"blocks", p.split_blocks}};
  return out;
}

ParamInfo param_from_json(const nlohmann::json& j) {
  ParamInfo p{j.at("name").get<std::string>(), j.at("shape").get<std::vector<int64_t>>(),
              j.at("dtype").get<std::string>()};
  if (j.contains("tensor_split")) {
    p.split_dim = j.at("tensor_split").at("dim").get<int>();
    p.split_blocks = j.at("tensor_split").at("blocks").get<int>();
  }
  return p;
}

std::string resolve_tag(const std::string& dir, const std::string& tag) {
  if (!tag.empty()) {
    const std::string path = tag_path(dir, tag);
    DS_CHECK(fs::is_directory(path), IoError, "checkpoint ", path, " does not exist",
             fs::exists(path + ".tmp") ? " (only an unfinished " + tag + ".tmp is there)" : "");
    return path;
  }
  const auto latest = read_latest(dir);
  DS_CHECK(latest.has_value(), IoError, "no checkpoint in ", dir, " (no 'latest' file)");
  return tag_path(dir, *latest);
}

CheckpointReader::~CheckpointReader() = default;

CheckpointReader::CheckpointReader(std::string tag_dir) : dir_(std::move(tag_dir)) {
  const std::string manifest_path = (fs::path(dir_) / kManifestName).string();
  {
    std::ifstream in(manifest_path, std::ios::binary);
    DS_CHECK(in, IoError, manifest_path, ": missing (not a deepshard checkpoint directory?)");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    try {
      manifest_ = nlohmann::json::parse(text);
      DS_CHECK(manifest_.is_object(), IoError, "not a JSON object");
      const int version = manifest_.at("format_version").get<int>();
      DS_CHECK(version == kCheckpointFormatVersion, IoError, "format version ", version,
               "; this build reads version ", kCheckpointFormatVersion);
      world_size_ = manifest_.at("world_size").get<int>();
      DS_CHECK(world_size_ >= 1, IoError, "world_size ", world_size_);
      for (const auto& p : manifest_.at("parameters")) params_.push_back(param_from_json(p));
      manifest_.at("zero_stage").get<int>();
    } catch (const nlohmann::json::exception& e) {
      throw IoError(detail::concat(manifest_path, ": corrupt manifest: ", e.what()));
    } catch (const IoError& e) {
      throw IoError(detail::concat(manifest_path, ": corrupt manifest: ", e.what()));
    }
  }
  for (int r = 0; r < world_size_; ++r) {
    const std::string path = (fs::path(dir_) / shard_file_name(r)).string();
    DS_CHECK(fs::exists(path), IoError, path, ": missing shard file (the checkpoint was saved by ",
             world_size_, " ranks; every rank's file is needed)");
    files_.push_back(std::make_unique<ShardReader>(path));
    const ShardReader& f = *files_.back();
    DS_CHECK(f.rank() == r && f.world_size() == world_size_, IoError, path,
             ": its header says rank ", f.rank(), " of ", f.world_size(),
             ", the manifest expects rank ", r, " of ", world_size_);
    for (size_t i = 0; i < f.records().size(); ++i) {
      const auto& rec = f.records()[i];
      std::string name;
      int64_t begin = 0, end = 0;
      StateKind kind{};
      DS_CHECK(parse_record_name(rec.name, name, begin, end, kind), IoError, path,
               ": unexpected record '", rec.name, "'");
      DS_CHECK(rec.dtype == at::kFloat && rec.shape == std::vector<int64_t>{end - begin}, IoError,
               path, ": record '", rec.name, "' is not ", end - begin, " float32 elements");
      pieces_[{name, kind}].push_back({begin, end, files_.size() - 1, i});
    }
  }
  // Every parameter's every state is covered exactly once.
  for (const auto& p : params_) {
    for (StateKind kind : kStateKinds) {
      auto it = pieces_.find({p.name, kind});
      DS_CHECK(it != pieces_.end(), IoError, dir_, ": no shard file holds '", p.name, "' (",
               to_string(kind), ")");
      auto& pieces = it->second;
      std::sort(pieces.begin(), pieces.end(),
                [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
      int64_t covered = 0;
      for (const Piece& piece : pieces) {
        DS_CHECK(piece.begin == covered, IoError, dir_, ": '", p.name, "' (", to_string(kind),
                 "): elements from ", covered, " are ",
                 piece.begin > covered ? "missing" : "held twice", " (", files_[piece.file]->path(),
                 " has [", piece.begin, ":", piece.end, "))");
        covered = piece.end;
      }
      DS_CHECK(covered == p.numel(), IoError, dir_, ": '", p.name, "' (", to_string(kind), ") has ",
               covered, " elements in the shard files, the manifest says shape ",
               shape_text(p.shape));
    }
  }
  for (const auto& [key, pieces] : pieces_) {
    DS_CHECK(std::any_of(params_.begin(), params_.end(),
                         [&](const ParamInfo& p) { return p.name == key.first; }),
             IoError, files_[pieces.front().file]->path(), ": records of '", key.first,
             "', which is not in the manifest's parameter table");
  }
}

const ParamInfo& CheckpointReader::param(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return p;
  throw IoError(detail::concat(dir_, ": no parameter '", name, "' in the checkpoint"));
}

at::Tensor CheckpointReader::read_range(const std::string& name, StateKind kind, int64_t begin,
                                        int64_t end) const {
  const ParamInfo& p = param(name);
  DS_CHECK(0 <= begin && begin <= end && end <= p.numel(), IoError, dir_, ": elements [", begin,
           ":", end, ") of '", name, "' requested; it has ", p.numel());
  for (const Piece& piece : pieces_.at({name, kind})) {
    // Loading at the saving layout: one record is the range (no copy).
    if (piece.begin == begin && piece.end == end) return files_[piece.file]->read(piece.record);
  }
  return read_ranges(name, kind, {{begin, end}});
}

at::Tensor CheckpointReader::read_ranges(
    const std::string& name, StateKind kind,
    const std::vector<std::pair<int64_t, int64_t>>& ranges) const {
  const ParamInfo& p = param(name);
  // Where each range starts in the output.
  std::vector<int64_t> at_out;
  int64_t total = 0, previous_end = 0;
  for (const auto& [b, e] : ranges) {
    DS_CHECK(previous_end <= b && b <= e && e <= p.numel(), IoError, dir_, ": elements [", b, ":",
             e, ") of '", name, "' requested (after ", previous_end, "); it has ", p.numel());
    at_out.push_back(total);
    total += e - b;
    previous_end = e;
  }
  at::Tensor out = at::empty({total}, at::kFloat);
  // Pieces and ranges are both sorted by begin: walk them together, reading each record that
  // overlaps a range once.
  size_t first = 0;
  for (const Piece& piece : pieces_.at({name, kind})) {
    while (first < ranges.size() && ranges[first].second <= piece.begin) ++first;
    at::Tensor record;
    for (size_t i = first; i < ranges.size() && ranges[i].first < piece.end; ++i) {
      const int64_t lo = std::max(ranges[i].first, piece.begin);
      const int64_t hi = std::min(ranges[i].second, piece.end);
      if (lo >= hi) continue;
      if (!record.defined()) record = files_[piece.file]->read(piece.record);
      out.narrow(0, at_out[i] + lo - ranges[i].first, hi - lo)
          .copy_(record.narrow(0, lo - piece.begin, hi - lo));
    }
  }
  return out;
}

std::map<std::string, at::Tensor> CheckpointReader::consolidated_weights() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : params_)
    out[p.name] = read_range(p.name, StateKind::kFp32, 0, p.numel()).view(p.shape);
  return out;
}

void load_consolidated_weights(const CheckpointReader& reader,
                               const std::map<std::string, at::Tensor>& params) {
  const auto weights = reader.consolidated_weights();
  at::NoGradGuard no_grad;
  for (const auto& [name, param] : params) {
    auto it = weights.find(name);
    DS_CHECK(it != weights.end(), IoError, reader.path(), ": no parameter '", name,
             "' in the checkpoint (another model?)");
    DS_CHECK(it->second.sizes() == param.sizes(), IoError, reader.path(), ": parameter '", name,
             "' has shape ", shape_text(it->second.sizes().vec()), " in the checkpoint but ",
             shape_text(param.sizes().vec()), " in the model");
    param.copy_(it->second);
  }
  DS_CHECK(weights.size() == params.size(), IoError, reader.path(), ": the checkpoint has ",
           weights.size(), " parameters, the model ", params.size());
}

}  // namespace deepshard::checkpoint
