// rendezvous_from_env under torchrun's, Open MPI's and Slurm's variables, set in-process (each test
// starts from an environment without any of them and restores the original afterwards).
#include "deepshard/comm/rendezvous.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace rendezvous_test {

const char* const kVariables[] = {"MASTER_ADDR",
                                  "MASTER_PORT",
                                  "RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "SLURM_NTASKS_PER_NODE",
                                  "SLURM_TASKS_PER_NODE",
                                  "SLURM_NNODES",
                                  "SLURM_NODEID"};

class RendezvousEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* value = std::getenv(name);
      if (value != nullptr) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  static void set(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) ::setenv(name.c_str(), value.c_str(), 1);
  }
  // The CommError message of rendezvous_from_env(), or "" when it succeeds.
  static std::string error() {
    try {
      rendezvous_from_env();
    } catch (const CommError& e) {
      return e.what();
    }
    return "";
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST_F(RendezvousEnv, NothingSetIsASingleRank) {
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.source, "none");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_world_size, 1);
}

TEST_F(RendezvousEnv, Torchrun) {
  set({{"MASTER_ADDR", "node0"},
       {"MASTER_PORT", "1234"},
       {"RANK", "5"},
       {"WORLD_SIZE", "8"},
       {"LOCAL_RANK", "1"},
       {"LOCAL_WORLD_SIZE", "4"}});
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.master_addr, "node0");
  EXPECT_EQ(info.master_port, 1234);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
}

TEST_F(RendezvousEnv, TorchrunOnOneNodeDefaultsTheStoreAddress) {
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
}

TEST_F(RendezvousEnv, TorchrunErrorsNameTheVariable) {
  set({{"RANK", "1"}});
  EXPECT_NE(error().find("WORLD_SIZE is not set"), std::string::npos) << error();
  set({{"WORLD_SIZE", "two"}});
  EXPECT_NE(error().find("WORLD_SIZE='two' is not an integer"), std::string::npos) << error();
  set({{"WORLD_SIZE", "2"}, {"RANK", "2"}});
  EXPECT_NE(error().find("RANK=2 must be in [0, WORLD_SIZE=2)"), std::string::npos) << error();
  set({{"RANK", "1"}, {"MASTER_PORT", "70000"}});
  EXPECT_NE(error().find("MASTER_PORT=70000"), std::string::npos) << error();
  set({{"MASTER_PORT", "29500x"}});
  EXPECT_NE(error().find("MASTER_PORT='29500x'"), std::string::npos) << error();
  set({{"MASTER_PORT", "29500"}, {"LOCAL_WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  EXPECT_NE(error().find("MASTER_ADDR is not set"), std::string::npos) << error();
  set({{"LOCAL_WORLD_SIZE", "1"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}});
  EXPECT_NE(error().find("LOCAL_RANK=1"), std::string::npos) << error();
}

TEST_F(RendezvousEnv, OpenMpi) {
  set({{"OMPI_COMM_WORLD_RANK", "3"},
       {"OMPI_COMM_WORLD_SIZE", "4"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 3);
  EXPECT_EQ(info.master_addr, "127.0.0.1");  // one node
  EXPECT_EQ(info.master_port, 29500);
}

TEST_F(RendezvousEnv, OpenMpiOnSeveralNodesNeedsMasterAddr) {
  set({{"OMPI_COMM_WORLD_RANK", "3"},
       {"OMPI_COMM_WORLD_SIZE", "4"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_NE(error().find("MASTER_ADDR is not set"), std::string::npos) << error();
  set({{"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "4000"}});
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.master_addr, "10.1.2.3");
  EXPECT_EQ(info.master_port, 4000);
  EXPECT_EQ(info.local_world_size, 2);
  set({{"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}});
  EXPECT_NE(error().find("OMPI_COMM_WORLD_LOCAL_RANK=-1"), std::string::npos) << error();
}

TEST_F(RendezvousEnv, TorchrunTakesPrecedenceOverMpiAndSlurm) {
  set({{"RANK", "0"},
       {"WORLD_SIZE", "1"},
       {"OMPI_COMM_WORLD_RANK", "3"},
       {"OMPI_COMM_WORLD_SIZE", "4"},
       {"SLURM_PROCID", "2"},
       {"SLURM_NTASKS", "3"}});
  EXPECT_EQ(rendezvous_from_env().source, "torchrun");
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(rendezvous_from_env().source, "openmpi");
}

TEST_F(RendezvousEnv, SlurmWithTasksPerNode) {
  set({{"SLURM_PROCID", "5"},
       {"SLURM_NTASKS", "6"},
       {"SLURM_LOCALID", "2"},
       {"SLURM_NTASKS_PER_NODE", "3"},
       {"SLURM_NNODES", "2"},
       {"MASTER_ADDR", "n0"}});
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 6);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.local_world_size, 3);
  EXPECT_EQ(info.master_addr, "n0");
}

TEST_F(RendezvousEnv, SlurmDerivesTasksPerNode) {
  // Uneven layout: two tasks on each of two nodes, then one; this is the third node.
  set({{"SLURM_PROCID", "4"},
       {"SLURM_NTASKS", "5"},
       {"SLURM_LOCALID", "0"},
       {"SLURM_TASKS_PER_NODE", "2(x2),1"},
       {"SLURM_NODEID", "2"},
       {"SLURM_NNODES", "3"},
       {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(rendezvous_from_env().local_world_size, 1);
  ::setenv("SLURM_NODEID", "1", 1);
  EXPECT_EQ(rendezvous_from_env().local_world_size, 2);
  ::setenv("SLURM_TASKS_PER_NODE", "2(x2", 1);
  EXPECT_NE(error().find("SLURM_TASKS_PER_NODE"), std::string::npos) << error();
  // Without a per-node list: SLURM_NTASKS / SLURM_NNODES.
  ::unsetenv("SLURM_TASKS_PER_NODE");
  set({{"SLURM_PROCID", "3"},
       {"SLURM_NTASKS", "4"},
       {"SLURM_NNODES", "2"},
       {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(rendezvous_from_env().local_world_size, 2);
}

TEST_F(RendezvousEnv, SlurmOnOneNodeDefaultsTheStoreAddress) {
  set({{"SLURM_PROCID", "1"},
       {"SLURM_NTASKS", "2"},
       {"SLURM_LOCALID", "1"},
       {"SLURM_NNODES", "1"}});
  RendezvousInfo info = rendezvous_from_env();
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.local_world_size, 2);
  set({{"SLURM_NTASKS", "x"}});
  EXPECT_NE(error().find("SLURM_NTASKS='x'"), std::string::npos) << error();
}

}  // namespace rendezvous_test
}  // namespace deepshard::comm
