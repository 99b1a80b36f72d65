// Tests of SwapFile and SwapDir (swap_file.h): the checks before training (missing, unwritable,
// refusing O_DIRECT, too small), stale files replaced, a live folder refused, removal at exit, and
// a really full filesystem (a size-limited tmpfs) refused when the file is created.
#include "io/swap_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "deepshard/util/error.h"
#include "io/aio_options.h"
#include "io_test_helpers.h"
#include "support/test_support.h"

namespace deepshard::io {
namespace swap_file_test {

namespace fs = std::filesystem;
using deepshard::testing::TempDir;
using testing::ScopedMount;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(SwapDir, CreatesRankFolderAndRemovesEverythingAtExit) {
  TempDir root;
  {
    SwapDir dir(root.path(), "run1", 3, 1 << 20);
    EXPECT_EQ(dir.path(), root.path() + "/run1/rank3");
    auto f = dir.create("group0.swp", 8 * kIoAlignment);
    EXPECT_TRUE(fs::exists(f->path()));
    EXPECT_EQ(fs::file_size(f->path()), static_cast<uintmax_t>(8 * kIoAlignment));
  }
  EXPECT_FALSE(fs::exists(root.path() + "/run1"));
}

TEST(SwapDir, ReplacesStaleFilesOfACrashedRunAndRefusesAFolderInUse) {
  TempDir root;
  fs::create_directories(root.path() + "/run/rank0");
  deepshard::testing::write_file(root.path() + "/run/rank0/group7.swp", "stale");
  SwapDir dir(root.path(), "run", 0, 0);
  EXPECT_FALSE(fs::exists(root.path() + "/run/rank0/group7.swp"));
  const std::string err = error_of([&] { SwapDir again(root.path(), "run", 0, 0); });
  EXPECT_TRUE(contains(err, "in use by another running process")) << err;
  SwapDir other_rank(root.path(), "run", 1, 0);  // another rank's folder is free
}

TEST(SwapDir, AMissingFolderIsAnErrorNamingItAndTheBytesNeeded) {
  TempDir root;
  const std::string missing = root.file("nope");
  const std::string err = error_of([&] { SwapDir dir(missing, "run", 0, 123456789); });
  EXPECT_TRUE(contains(err, missing)) << err;
  EXPECT_TRUE(contains(err, "no such folder")) << err;
  EXPECT_TRUE(contains(err, "123456789 bytes")) << err;
}

TEST(SwapDir, TooLittleFreeSpaceIsAnErrorBeforeAnyFileIsCreated) {
  TempDir root;
  const int64_t need = free_bytes(root.path()) + (int64_t{1} << 40);
  const std::string err = error_of([&] { SwapDir dir(root.path(), "run", 0, need); });
  EXPECT_TRUE(contains(err, root.path())) << err;
  EXPECT_TRUE(contains(err, std::to_string(need) + " bytes")) << err;
  EXPECT_FALSE(fs::exists(root.path() + "/run"));
}

TEST(SwapDir, AnUnwritableFolderIsAnError) {
  // root ignores permission bits: a read-only filesystem is unwritable for everyone.
  ScopedMount ro("tmpfs", "size=1m,ro");
  std::string path;
  TempDir fallback;
  if (ro.mounted()) {
    path = ro.path();
  } else if (::geteuid() != 0) {
    path = fallback.file("ro");
    fs::create_directories(path);
    ::chmod(path.c_str(), 0500);
  } else {
    GTEST_SKIP() << "root without mount permission (" << ro.why()
                 << "): cannot make an unwritable folder";
  }
  const std::string err = error_of([&] { SwapDir dir(path, "run", 0, 0); });
  EXPECT_TRUE(contains(err, path)) << err;
  EXPECT_TRUE(contains(err, "not writable")) << err;
}

TEST(SwapDir, AFilesystemRefusingDirectIoIsAnErrorNamingThePath) {
  // ramfs refuses O_DIRECT (as tmpfs did before Linux 6.6; this machine's tmpfs accepts it).
  ScopedMount ramfs("ramfs", "");
  if (!ramfs.mounted()) GTEST_SKIP() << "cannot mount ramfs here: " << ramfs.why();
  const std::string err = error_of([&] { SwapDir dir(ramfs.path(), "run", 0, 0); });
  EXPECT_TRUE(contains(err, ramfs.path())) << err;
  EXPECT_TRUE(contains(err, "refuses direct I/O")) << err;
}

TEST(SwapFile, AFullFilesystemRefusesTheFileWhenItIsCreated) {
  ScopedMount small("tmpfs", "size=256k");
  if (!small.mounted()) GTEST_SKIP() << "cannot mount a size-limited tmpfs here: " << small.why();
  SwapDir dir(small.path(), "run", 0, 0);
  const std::string err = error_of([&] { dir.create("big.swp", 1 << 20); });
  EXPECT_TRUE(contains(err, "big.swp")) << err;
  EXPECT_TRUE(contains(err, "1048576 bytes")) << err;
  EXPECT_TRUE(contains(err, std::strerror(ENOSPC))) << err;
  EXPECT_FALSE(fs::exists(dir.path() + "/big.swp"));
}

}  // namespace swap_file_test
}  // namespace deepshard::io
