// Real multi-process launchers: two `deepshard launch` "nodes" of 2 ranks each (two network
// namespaces joined by a veth pair where the machine allows `ip netns add`, else two loopback
// addresses 127.0.0.2 / 127.0.0.1 and a store on 127.0.0.2) train to the losses of 4 ranks under
// one launcher; Open MPI's `mpirun -np 2` trains to the launcher's 2-rank losses (skipped with a
// message when mpirun is absent: scripts/setup.sh installs openmpi-bin), and so does `srun -n 2` on
// a single-node Slurm the test configures and starts in a temporary folder (slurmctld + slurmd,
// auth/none; skipped with a message when slurm-wlm is absent or cannot start). Tiny GPT, 8 steps,
// stage 2 (stage 3 under mpirun), fp32; losses within 1e-4 relative.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "launch/launcher.h"
#include "launch/subprocess.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace multinode_test {

constexpr int64_t kSteps = 8;

bool run_quietly(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// Two namespaces joined by a veth pair: ns0 has 10.231.0.1, ns1 10.231.0.2. Removed on
// destruction. ok() is false when the machine does not allow it.
struct TwoNamespaces {
  TwoNamespaces()
      : ns0("dsn0_" + std::to_string(::getpid())), ns1("dsn1_" + std::to_string(::getpid())) {
    const std::string v0 = "dsv0" + std::to_string(::getpid() % 100000);
    const std::string v1 = "dsv1" + std::to_string(::getpid() % 100000);
    ok = run_quietly("ip netns add " + ns0) && run_quietly("ip netns add " + ns1) &&
         run_quietly("ip link add " + v0 + " netns " + ns0 + " type veth peer name " + v1 +
                     " netns " + ns1) &&
         run_quietly("ip -n " + ns0 + " addr add 10.231.0.1/24 dev " + v0) &&
         run_quietly("ip -n " + ns1 + " addr add 10.231.0.2/24 dev " + v1) &&
         run_quietly("ip -n " + ns0 + " link set " + v0 + " up") &&
         run_quietly("ip -n " + ns1 + " link set " + v1 + " up") &&
         run_quietly("ip -n " + ns0 + " link set lo up") &&
         run_quietly("ip -n " + ns1 + " link set lo up");
  }
  ~TwoNamespaces() {
    run_quietly("ip netns del " + ns0);
    run_quietly("ip netns del " + ns1);
  }
  std::string ns0, ns1;
  bool ok = false;
};

TEST(MultiNode, TwoLaunchersAsTwoNodesTrainLikeFourRanksOnOne) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string extra = R"({"zero_optimization": {"stage": 2}})";
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("unused"), 2, 1, kSteps, extra));
  auto one = run_ranks(4, deepshard_exe(),
                       {"train", "--config", config, "--set", "train.run_dir=" + dir.file("one")});
  ASSERT_EQ(one.exit_status, 0) << one.output;
  const RunLosses reference = losses_of(dir.file("one"), one.output);

  TwoNamespaces ns;
  std::string master = "10.231.0.1";
  if (!ns.ok) {
    std::printf("network namespaces not allowed here: two loopback addresses instead\n");
    master = "127.0.0.2";
  }
  const int port = launch::find_free_port();
  std::vector<std::unique_ptr<launch::Subprocess>> nodes;
  for (int node = 0; node < 2; ++node) {
    launch::SubprocessOptions o;
    if (ns.ok) o.argv = {"ip", "netns", "exec", node == 0 ? ns.ns0 : ns.ns1};
    for (const std::string& a :
         {deepshard_exe(), std::string("launch"), std::string("-n"), std::string("2"),
          std::string("--nnodes"), std::string("2"), std::string("--node-rank"),
          std::to_string(node), std::string("--master-addr"), master, std::string("--master-port"),
          std::to_string(port), std::string("--"), deepshard_exe(), std::string("train"),
          std::string("--config"), config, std::string("--set"),
          "train.run_dir=" + dir.file("two")}) {
      o.argv.push_back(a);
    }
    o.extra_env = {{"DEEPSHARD_JOB_TOKEN", "two-node-test-token"}};
    nodes.push_back(std::make_unique<launch::Subprocess>(o));
  }
  std::string output;
  for (auto& n : nodes) {
    auto status = n->wait(300);
    output += read_output(*n);
    EXPECT_EQ(status.value_or(-1), 0) << output;
  }
  std::printf("%s", output.c_str());
  expect_same_losses(losses_of(dir.file("two"), output), reference,
                     ns.ok ? "2 nodes (network namespaces) x 2 ranks vs 4 ranks"
                           : "2 nodes (loopback addresses) x 2 ranks vs 4 ranks");
}

TEST(MultiNode, MpirunTrainsLikeTheLauncher) {
  if (!run_quietly("command -v mpirun")) {
    GTEST_SKIP() << "mpirun not installed (scripts/setup.sh installs openmpi-bin)";
  }
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("unused"), 2, 1, kSteps,
                                     R"({"zero_optimization": {"stage": 3}})"));
  auto launched = run_ranks(
      2, deepshard_exe(), {"train", "--config", config, "--set", "train.run_dir=" + dir.file("l")});
  ASSERT_EQ(launched.exit_status, 0) << launched.output;
  const int port = launch::find_free_port();
  auto mpi = run_exe("mpirun",
                     {"--allow-run-as-root",
                      "--oversubscribe",
                      "-np",
                      "2",
                      "--mca",
                      "btl",
                      "self,tcp",
                      "-x",
                      "MASTER_ADDR=127.0.0.1",
                      "-x",
                      "MASTER_PORT=" + std::to_string(port),
                      "-x",
                      "OMP_NUM_THREADS=1",
                      "-x",
                      "OPENBLAS_NUM_THREADS=1",
                      deepshard_exe(),
                      "train",
                      "--config",
                      config,
                      "--set",
                      "train.run_dir=" + dir.file("m")},
                     300);
  ASSERT_EQ(mpi.exit_status, 0) << mpi.output;
  EXPECT_NE(mpi.output.find("2 rank(s)"), std::string::npos) << mpi.output;
  expect_same_losses(losses_of(dir.file("m"), mpi.output),
                     losses_of(dir.file("l"), launched.output), "mpirun -np 2 vs launcher");
}

// A single-node Slurm cluster in `dir` (slurmctld and slurmd on free ports, this host as the only
// node); stopped on destruction. ok() when srun can run.
struct SingleNodeSlurm {
  explicit SingleNodeSlurm(const TempDir& dir) {
    if (!run_quietly("command -v slurmctld && command -v slurmd && command -v srun")) {
      why = "slurm-wlm not installed (scripts/setup.sh installs it)";
      return;
    }
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    conf = dir.file("slurm.conf");
    const std::string d = dir.path();
    run_quietly("mkdir -p " + d + "/state " + d + "/spool");
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    write_file(conf, "ClusterName=dstest\nSlurmctldHost=" + std::string(host) +
                         "(127.0.0.1)\nSlurmctldPort=" + std::to_string(launch::find_free_port()) +
                         "\nSlurmdPort=" + std::to_string(launch::find_free_port()) +
                         "\nAuthType=auth/none\nCredType=cred/none\nSlurmUser=root\n"
                         "SlurmdUser=root\nStateSaveLocation=" +
                         d + "/state\nSlurmdSpoolDir=" + d + "/spool\nSlurmctldPidFile=" + d +
                         "/ctld.pid\nSlurmdPidFile=" + d +
                         "/d.pid\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                         "SwitchType=switch/none\nMpiDefault=none\nReturnToService=2\n"
                         "SchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
                         "SelectTypeParameters=CR_Core\nJobCompType=jobcomp/none\n"
                         "AccountingStorageType=accounting_storage/none\nNodeName=" +
                         std::string(host) + " NodeAddr=127.0.0.1 CPUs=" + std::to_string(cpus) +
                         " State=UNKNOWN\nPartitionName=debug Nodes=" + std::string(host) +
                         " Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n");
    for (const char* daemon : {"slurmctld", "slurmd"}) {
      launch::SubprocessOptions o;
      o.argv = {daemon, "-D", "-f", conf};
      o.extra_env = {{"SLURM_CONF", conf}};
      daemons.push_back(std::make_unique<launch::Subprocess>(o));
    }
    for (int i = 0; i < 100 && !ok; ++i) {
      ok = run_quietly("SLURM_CONF=" + conf + " sinfo -h -o %t | grep -q idle");
      if (!ok) ::usleep(200000);
    }
    if (!ok) why = "slurmctld/slurmd did not come up in this sandbox within 20 s";
  }
  std::string conf, why;
  bool ok = false;
  std::vector<std::unique_ptr<launch::Subprocess>> daemons;  // killed on destruction
};

TEST(MultiNode, SrunTrainsLikeTheLauncher) {
  TempDir dir;
  SingleNodeSlurm slurm(dir);
  if (!slurm.ok) GTEST_SKIP() << slurm.why;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("unused"), 2, 1, kSteps,
                                     R"({"zero_optimization": {"stage": 1}})"));
  auto launched = run_ranks(
      2, deepshard_exe(), {"train", "--config", config, "--set", "train.run_dir=" + dir.file("l")});
  ASSERT_EQ(launched.exit_status, 0) << launched.output;
  const int port = launch::find_free_port();
  auto srun = run_exe(
      "srun",
      {"-n", "2",
       "--export=ALL,MASTER_ADDR=127.0.0.1,MASTER_PORT=" + std::to_string(port) +
           ",OMP_NUM_THREADS=1,OPENBLAS_NUM_THREADS=1",
       deepshard_exe(), "train", "--config", config, "--set", "train.run_dir=" + dir.file("s")},
      300, {{"SLURM_CONF", slurm.conf}});
  ASSERT_EQ(srun.exit_status, 0) << srun.output;
  EXPECT_NE(srun.output.find("2 rank(s)"), std::string::npos) << srun.output;
  expect_same_losses(losses_of(dir.file("s"), srun.output),
                     losses_of(dir.file("l"), launched.output), "srun -n 2 vs launcher");
}

}  // namespace multinode_test
}  // namespace deepshard::testing
