// An emulated cluster for tests: K nodes made by scripts/cluster.sh (network namespaces with their
// own UTS and IPC namespaces, joined through a bridge by tc-shaped veth links), a name and subnet
// unique to this process and instance, and a teardown that always happens: a reaper process
// (started before the namespaces exist, in its own session) removes them when the cluster is
// destroyed or when the test process dies in any way, a ctest timeout's SIGKILL included.
// launch_on_cluster() runs one `deepshard launch --nnodes K --node-rank i` per node with a bounded
// time and returns each node's exit status and output.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace deepshard::testing {

struct ClusterOptions {
  int nodes = 2;
  std::string rate;   // tbf rate of every link ("1gbit", "100mbit"); "" = unshaped
  std::string burst;  // tbf burst; "" = scripts/cluster.sh's default
};

class EmulatedCluster {
 public:
  // "" when this machine can make one (root, `ip netns`, the bridge module); otherwise why not,
  // for GTEST_SKIP.
  static std::string unavailable();

  // Makes the nodes; throws std::runtime_error with cluster.sh's message when it cannot.
  explicit EmulatedCluster(const ClusterOptions& options);
  ~EmulatedCluster();  // removes every namespace (and kills what still runs in them)
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  const std::string& name() const { return name_; }
  int nodes() const { return nodes_; }
  std::string address(int node) const;  // node's address on the cluster's subnet
  // argv that runs `command` on `node` (its namespaces, hostname node<i>).
  std::vector<std::string> on_node(int node, const std::vector<std::string>& command) const;
  // Cuts (false) or restores (true) node's link; shapes it to `rate` in both directions.
  void set_link(int node, bool up) const;
  void shape(int node, const std::string& rate, const std::string& burst = "") const;

 private:
  std::string name_;
  std::string subnet_;
  int nodes_ = 0;
  int reaper_pid_ = -1;
  int reaper_fd_ = -1;  // closing it tells the reaper to tear the cluster down
};

struct NodeRun {
  int exit_status = -1;  // -1: killed at the timeout
  std::string output;    // the node's launcher output (stdout and stderr merged)
  double seconds = 0;    // from the start until the launcher exited
  std::chrono::steady_clock::time_point ended;  // when it exited (or was killed)
};

struct ClusterLaunch {
  int ranks_per_node = 1;
  std::vector<std::string> command;        // each rank's command (after `--`)
  std::map<std::string, std::string> env;  // added to every launcher's environment
  double timeout_s = 300;                  // every launcher still running then is killed
  int master_port = 29500;
};

// Starts `deepshard launch -n M --nnodes K --node-rank i --master-addr <node 0>` on every node at
// once (a job token unique to this call unless env sets DEEPSHARD_JOB_TOKEN) and waits for all of
// them, reading their output as it comes.
std::vector<NodeRun> launch_on_cluster(const EmulatedCluster& cluster, const ClusterLaunch& launch);

// Every node's output, each line prefixed with "[node i] " (for failure messages).
std::string joined_output(const std::vector<NodeRun>& runs);

}  // namespace deepshard::testing

// Skips the current test with the reason when no emulated cluster can be made here.
#define DS_REQUIRE_EMULATED_CLUSTER()                                                 \
  do {                                                                                \
    const std::string why = ::deepshard::testing::EmulatedCluster::unavailable();     \
    if (!why.empty()) GTEST_SKIP() << "no emulated cluster on this machine: " << why; \
  } while (0)
