// Implementation of the shared test helpers.
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace deepshard::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/deepshard-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + templ);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

launch::RunResult run_exe(const std::string& exe, const std::vector<std::string>& args,
                          double timeout_s, const std::map<std::string, std::string>& env) {
  launch::SubprocessOptions options;
  options.argv.push_back(exe);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.extra_env = env;
  launch::RunResult result = launch::run_command(options, timeout_s);
  if (result.timed_out) {
    ADD_FAILURE() << "timed out after " << timeout_s << " s: " << exe << "\n" << result.output;
  }
  return result;
}

launch::RunResult run_deepshard(const std::vector<std::string>& args, double timeout_s,
                                const std::map<std::string, std::string>& env) {
  return run_exe(deepshard_exe(), args, timeout_s, env);
}

launch::RunResult run_ranks(int n, const std::string& exe, const std::vector<std::string>& args,
                            double timeout_s, const std::map<std::string, std::string>& env) {
  std::vector<std::string> full = {"launch", "-n", std::to_string(n), "--", exe};
  full.insert(full.end(), args.begin(), args.end());
  return run_deepshard(full, timeout_s, env);
}

std::string read_output(launch::Subprocess& process) {
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(process.output_fd(), buffer, sizeof(buffer))) > 0)
    out.append(buffer, size_t(n));
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << content;
}

std::string deepshard_exe() { return DS_EXE; }
std::string faults_exe() { return DS_FAULTS_EXE; }
std::string binary_dir() { return DS_BINARY_DIR; }
std::string source_dir() { return DS_SOURCE_DIR; }
std::string test_data_dir() { return std::string(DS_SOURCE_DIR) + "/tests/data"; }

}  // namespace deepshard::testing
