// Tag directories: fill a .tmp directory, fsync, rename, then replace `latest` atomically.
#include "checkpoint/tag_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/atomic_file.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLatest = "latest";

// Makes a directory's entries (a rename into it, its files' names) durable. Best effort on
// filesystems that refuse fsync on directories.
void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DS_CHECK(fd >= 0, IoError, "cannot open directory ", dir.string(), " to sync it");
  ::fsync(fd);
  ::close(fd);
}

void check_tag(const std::string& tag) {
  const bool ok = !tag.empty() && tag.find('/') == std::string::npos && tag != kLatest &&
                  tag != "." && tag != ".." && !tag.ends_with(".tmp");
  DS_CHECK(ok, IoError, "invalid checkpoint tag '", tag,
           "' (a file name: no '/', not 'latest', not ending in '.tmp')");
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  DS_CHECK(!ec, IoError, "cannot remove ", p.string(), ": ", ec.message());
}

}  // namespace

std::string tag_path(const std::string& dir, const std::string& tag) {
  return (fs::path(dir) / tag).string();
}

std::string begin_tag(const std::string& dir, const std::string& tag) {
  check_tag(tag);
  const fs::path tmp_dir = fs::path(dir) / (tag + ".tmp");
  std::error_code ec;
  fs::create_directories(dir, ec);
  DS_CHECK(!ec, IoError, "cannot create checkpoint directory ", dir, ": ", ec.message());
  remove_tree(tmp_dir);  // a crashed earlier attempt
  remove_tree(fs::path(dir) / (tag + ".old.tmp"));
  fs::create_directory(tmp_dir, ec);
  DS_CHECK(!ec, IoError, "cannot create ", tmp_dir.string(), ": ", ec.message());
  return tmp_dir.string();
}

void abort_tag(const std::string& dir, const std::string& tag) {
  std::error_code ignored;
  fs::remove_all(fs::path(dir) / (tag + ".tmp"), ignored);
}

void publish_tag(const std::string& dir, const std::string& tag) {
  check_tag(tag);
  const fs::path final_dir = fs::path(dir) / tag;
  const fs::path tmp_dir = fs::path(dir) / (tag + ".tmp");
  const fs::path old_dir = fs::path(dir) / (tag + ".old.tmp");
  std::error_code ec;
  fsync_dir(tmp_dir);
  // Replacing an existing tag: move it aside first (a directory cannot be renamed onto a
  // non-empty one). `latest` may name it; until the rename below it names the old copy's path.
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old_dir, ec);
    DS_CHECK(!ec, IoError, "cannot move ", final_dir.string(), " aside: ", ec.message());
  }
  fs::rename(tmp_dir, final_dir, ec);
  DS_CHECK(!ec, IoError, "cannot rename ", tmp_dir.string(), " to ", final_dir.string(), ": ",
           ec.message());
  fsync_dir(dir);
  remove_tree(old_dir);

  AtomicFile latest((fs::path(dir) / kLatest).string());
  latest.write(tag.data(), tag.size());
  latest.commit();
  fsync_dir(dir);
}

void write_tag(const std::string& dir, const std::string& tag,
               const std::function<void(const std::string& tmp_dir)>& fill) {
  const std::string tmp_dir = begin_tag(dir, tag);
  try {
    fill(tmp_dir);
  } catch (...) {
    abort_tag(dir, tag);
    throw;
  }
  publish_tag(dir, tag);
}

std::optional<std::string> read_latest(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLatest;
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in, IoError, "cannot read ", path.string());
  std::string tag{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == '\r' || tag.back() == ' '))
    tag.pop_back();  // tolerate a hand-edited file
  DS_CHECK(!tag.empty(), IoError, path.string(), " is empty");
  DS_CHECK(fs::is_directory(fs::path(dir) / tag), IoError, path.string(), " names tag '", tag,
           "' but ", tag_path(dir, tag), " is not a directory");
  return tag;
}

}  // namespace deepshard::checkpoint
