// Subprocess and run_command against real child processes (sh, sleep): merged output, exit and
// signal statuses, timeouts, environment and working directory, start failures.
#include "launch/subprocess.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

#include "deepshard/util/error.h"
#include "support/test_support.h"
#include "util/stopwatch.h"

namespace deepshard::launch {
namespace subprocess_test {

SubprocessOptions shell(const std::string& script) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", script};
  return o;
}

TEST(RunCommand, MergesStdoutAndStderrAndReturnsTheExitCode) {
  RunResult r = run_command(shell("echo out; echo err 1>&2; exit 5"), 30);
  EXPECT_EQ(r.exit_status, 5);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.output, "out\nerr\n");
}

TEST(RunCommand, SignalDeathIs128PlusTheSignal) {
  EXPECT_EQ(run_command(shell("kill -KILL $$"), 30).exit_status, 128 + SIGKILL);
  EXPECT_EQ(run_command(shell("kill -TERM $$"), 30).exit_status, 128 + SIGTERM);
}

TEST(RunCommand, TimeoutKillsTheChildAndItsGroup) {
  auto start = std::chrono::steady_clock::now();
  // The background sleep is in the child's process group and holds the pipe: both must go.
  RunResult r = run_command(shell("echo before; sleep 100 & sleep 100"), 0.5);
  double elapsed = util::seconds_since(start);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_status, 124);
  EXPECT_EQ(r.output, "before\n");
  EXPECT_LT(elapsed, 5.0);
}

TEST(RunCommand, PassesExtraEnvironmentAndWorkingDirectory) {
  testing::TempDir dir;
  SubprocessOptions o = shell("echo \"$DS_TEST_VALUE\"; pwd; echo \"${HOME:+home set}\"");
  o.extra_env = {{"DS_TEST_VALUE", "forty two"}};
  o.working_dir = dir.path();
  RunResult r = run_command(o, 30);
  EXPECT_EQ(r.exit_status, 0);
  std::string expected_home = std::getenv("HOME") ? "home set\n" : "\n";
  EXPECT_EQ(r.output, "forty two\n" + dir.path() + "\n" + expected_home);
}

TEST(RunCommand, LargeOutputIsCollectedWhole) {
  RunResult r =
      run_command(shell("i=0; while [ $i -lt 20000 ]; do echo line$i; i=$((i+1)); done"), 60);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 20000);
  EXPECT_NE(r.output.find("line19999\n"), std::string::npos);
}

TEST(Subprocess, MissingExecutableThrowsNamingIt) {
  SubprocessOptions o;
  o.argv = {"deepshard-no-such-program"};
  try {
    Subprocess p(o);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deepshard-no-such-program"), std::string::npos);
  }
  o.argv = {"/nonexistent/dir/prog"};
  EXPECT_THROW(Subprocess{o}, Error);
}

TEST(Subprocess, PollWaitAndSignal) {
  Subprocess p(shell("exec sleep 100"));
  EXPECT_GT(p.pid(), 0);
  EXPECT_FALSE(p.poll().has_value());
  EXPECT_FALSE(p.wait(0.05).has_value());
  p.signal(SIGTERM);
  auto status = p.wait(10);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 128 + SIGTERM);
  EXPECT_EQ(p.poll(), status);  // reaped once, remembered
}

TEST(Subprocess, DestructorKillsARunningChild) {
  pid_t pid;
  {
    Subprocess p(shell("exec sleep 100"));
    pid = p.pid();
  }
  EXPECT_NE(::kill(pid, 0), 0);  // gone and reaped
}

}  // namespace subprocess_test
}  // namespace deepshard::launch
