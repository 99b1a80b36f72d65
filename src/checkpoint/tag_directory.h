// Checkpoint tag directories, as DeepSpeed lays them out: <dir>/<tag>/ holds one checkpoint and
// <dir>/latest holds the newest complete tag's name. A tag is written into <dir>/<tag>.tmp/, then
// renamed to <dir>/<tag>, and only then is `latest` replaced (tmp + rename), so a crash at any
// point leaves `latest` naming a complete tag; leftover .tmp directories are never read.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace deepshard::checkpoint {

// Creates <dir> if needed, removes a leftover <dir>/<tag>.tmp, calls fill(<dir>/<tag>.tmp) to
// write the checkpoint's files, then publishes it as <dir>/<tag> (replacing an older <dir>/<tag>)
// and points <dir>/latest at it. If fill throws, the .tmp directory is removed, `latest` is
// unchanged, and the exception propagates. A tag is a non-empty file name: no '/', not "latest",
// not ending in ".tmp" (IoError).
void write_tag(const std::string& dir, const std::string& tag,
               const std::function<void(const std::string& tmp_dir)>& fill);

// The same in steps, for writers in several processes (every rank writes its file into the .tmp
// directory, one process publishes): begin_tag creates a fresh <dir>/<tag>.tmp and returns its
// path; publish_tag syncs it, renames it to <dir>/<tag> and replaces `latest`; abort_tag removes
// the .tmp directory (no error if it is gone).
std::string begin_tag(const std::string& dir, const std::string& tag);
void publish_tag(const std::string& dir, const std::string& tag);
void abort_tag(const std::string& dir, const std::string& tag);

// The tag named by <dir>/latest, or nullopt if there is none. IoError if `latest` names a tag
// whose directory is missing.
std::optional<std::string> read_latest(const std::string& dir);

// <dir>/<tag>.
std::string tag_path(const std::string& dir, const std::string& tag);

}  // namespace deepshard::checkpoint
