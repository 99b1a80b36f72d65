// Subprocess: fork/exec with stdout and stderr merged into one pipe, an optional process group of
// its own, PR_SET_PDEATHSIG so that a child never outlives a killed parent, and exit statuses in
// the shell's convention (128 + signal). Everything the child needs (resolved path, argv, envp) is
// built before fork, so the child runs only async-signal-safe calls until execve.
#include "launch/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "deepshard/util/error.h"
#include "util/strings.h"

extern char** environ;

namespace deepshard::launch {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// argv[0] as execve needs it: unchanged when it has a '/', else the first match in the PATH of the
// child's environment (`env`, "KEY=VALUE" strings), as `env PATH=... COMMAND` would look it up.
std::string resolve_executable(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& entry : env) {
    if (entry.rfind("PATH=", 0) == 0) path = entry.substr(5);
  }
  for (const auto& dir : strings::split(path, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  throw Error(detail::concat("cannot start '", name, "': not found in PATH"));
}

// The parent's environment with `extra` added or replacing entries, as "KEY=VALUE" strings.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (extra.count(entry.substr(0, entry.find('='))) == 0) env.push_back(std::move(entry));
  }
  for (const auto& [key, value] : extra) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int decode_status(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return 128 + WTERMSIG(raw);
  return -1;
}

[[noreturn]] void report_errno_and_exit(int error_fd) {
  int err = errno;
  [[maybe_unused]] ssize_t n = ::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

// In the child after fork: only async-signal-safe calls. Reports errno through `error_fd` when
// something fails before execve succeeds.
[[noreturn]] void exec_child(const SubprocessOptions& options, pid_t parent, int out_fd,
                             int error_fd, const char* path, char* const* argv, char* const* envp) {
  if (options.new_process_group) ::setpgid(0, 0);
  if (options.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  // Dispositions and the mask survive execve: give the child the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
  if (::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(out_fd, STDERR_FILENO) < 0)
    report_errno_and_exit(error_fd);
  if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0)
    report_errno_and_exit(error_fd);
  ::execve(path, argv, envp);
  report_errno_and_exit(error_fd);
}

}  // namespace

Subprocess::Subprocess(const SubprocessOptions& options) {
  DS_CHECK(!options.argv.empty(), Error, "Subprocess: empty argv");
  std::vector<std::string> env_strings = child_environment(options.extra_env);
  std::string path = resolve_executable(options.argv[0], env_strings);
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);

  int out_pipe[2], error_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw Error(
        detail::concat("cannot start '", options.argv[0], "': pipe: ", std::strerror(errno)));
  }
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw Error(detail::concat("cannot start '", options.argv[0], "': pipe: ", std::strerror(err)));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    exec_child(options, parent, out_pipe[1], error_pipe[1], path.c_str(), argv.data(), envp.data());
  }
  int fork_errno = errno;
  ::close(out_pipe[1]);
  ::close(error_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(error_pipe[0]);
    throw Error(
        detail::concat("cannot start '", options.argv[0], "': fork: ", std::strerror(fork_errno)));
  }
  // Also set the group here, so that signal() works even before the child has run.
  if (options.new_process_group) ::setpgid(pid, pid);
  pid_ = pid;
  out_fd_ = out_pipe[0];
  signal_group_ = options.new_process_group;

  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    wait();
    ::close(out_fd_);
    out_fd_ = -1;
    throw Error(detail::concat("cannot start '", options.argv[0], "' (", path,
                               "): ", std::strerror(child_errno)));
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) {
    signal(SIGKILL);
    wait();
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

std::optional<int> Subprocess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int raw = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &raw, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = decode_status(raw);
  return status_;
}

std::optional<int> Subprocess::wait(double timeout_s) {
  if (status_) return status_;
  if (timeout_s < 0) {
    int raw = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &raw, 0);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) status_ = decode_status(raw);
    return status_;
  }
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::milliseconds(1);
  while (!poll()) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return status_;
}

void Subprocess::signal(int sig) {
  if (pid_ <= 0 || status_) return;  // once reaped, the pid may belong to someone else
  if (signal_group_ && ::kill(-pid_, sig) == 0) return;
  ::kill(pid_, sig);
}

}  // namespace deepshard::launch
