// Helpers shared by the test binaries: temporary directories, running deepshard (and worker)
// executables as real processes, and reading files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launch/subprocess.h"

namespace deepshard::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs the deepshard executable with `args`; output merged. Fails the test (ADD_FAILURE) on
// timeout.
launch::RunResult run_deepshard(const std::vector<std::string>& args, double timeout_s = 300,
                                const std::map<std::string, std::string>& env = {});

// Runs any executable (path) with args.
launch::RunResult run_exe(const std::string& exe, const std::vector<std::string>& args,
                          double timeout_s = 300,
                          const std::map<std::string, std::string>& env = {});

// `deepshard launch -n N -- exe args...`.
launch::RunResult run_ranks(int n, const std::string& exe, const std::vector<std::string>& args,
                            double timeout_s = 300,
                            const std::map<std::string, std::string>& env = {});

// Everything a started subprocess wrote to its (merged) output until it closed it.
std::string read_output(launch::Subprocess& process);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);

// Paths compiled in by tests/CMakeLists.txt.
std::string deepshard_exe();
// deepshard with the DEEPSHARD_TEST_* faults of tests/workers/fault_main.cpp.
std::string faults_exe();
std::string binary_dir();  // the build directory (worker executables live in binary_dir()/tests)
std::string source_dir();
std::string test_data_dir();  // tests/data of the checkout (see SOURCES.md in its folders)

}  // namespace deepshard::testing
