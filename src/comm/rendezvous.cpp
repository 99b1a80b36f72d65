// rendezvous_from_env: who this process is, from torchrun's, Open MPI's or Slurm's variables (in
// that order of precedence). Store address: MASTER_ADDR / MASTER_PORT in every case; MASTER_ADDR
// defaults to 127.0.0.1 only when the whole job is on one node, MASTER_PORT to 29500. Every
// malformed or inconsistent value is a CommError naming the variable.
#include "deepshard/comm/rendezvous.h"

#include <cstdlib>
#include <optional>

#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::comm {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

int parse_int(const char* name, const std::string& text) {
  std::optional<int> value = strings::parse_int(strings::trim(text));
  DS_CHECK(value.has_value(), CommError, "rendezvous: environment variable ", name, "='", text,
           "' is not an integer");
  return *value;
}

int required_int(const char* name, const char* because) {
  auto value = env(name);
  DS_CHECK(value.has_value(), CommError, "rendezvous: environment variable ", name, " is not set (",
           because, ")");
  return parse_int(name, *value);
}

int optional_int(const char* name, int fallback) {
  auto value = env(name);
  return value ? parse_int(name, *value) : fallback;
}

// The variable names of one launcher's convention.
struct Convention {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
  bool slurm_layout = false;  // ranks per node may have to be derived (slurm_local_world_size)
};

constexpr Convention kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr Convention kOpenMpi{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                              "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr Convention kSlurm{"slurm",         "SLURM_PROCID",          "SLURM_NTASKS",
                            "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", true};

// Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": two tasks on each of three nodes, then one) for node
// `node`.
int slurm_tasks_on_node(const std::string& text, int node) {
  int first = 0;
  for (const auto& item : strings::split(text, ',')) {
    size_t paren = item.find("(x");
    int tasks = parse_int("SLURM_TASKS_PER_NODE", item.substr(0, paren));
    int repeat = 1;
    if (paren != std::string::npos) {
      DS_CHECK(item.back() == ')', CommError,
               "rendezvous: environment variable SLURM_TASKS_PER_NODE='", text, "' is malformed");
      repeat = parse_int("SLURM_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3));
    }
    if (node < first + repeat) return tasks;
    first += repeat;
  }
  throw CommError(detail::concat("rendezvous: SLURM_TASKS_PER_NODE='", text,
                                 "' lists fewer nodes than SLURM_NODEID=", node));
}

// Ranks per node under Slurm: SLURM_NTASKS_PER_NODE, else derived from SLURM_TASKS_PER_NODE, else
// SLURM_NTASKS / SLURM_NNODES, else everything on one node.
int slurm_local_world_size(int world_size) {
  if (env("SLURM_NTASKS_PER_NODE")) return optional_int("SLURM_NTASKS_PER_NODE", 0);
  if (auto per_node = env("SLURM_TASKS_PER_NODE")) {
    return slurm_tasks_on_node(*per_node, optional_int("SLURM_NODEID", 0));
  }
  int nodes = optional_int("SLURM_NNODES", 1);
  DS_CHECK(nodes >= 1 && world_size % nodes == 0, CommError,
           "rendezvous: cannot derive tasks per node from SLURM_NTASKS=", world_size,
           " and SLURM_NNODES=", nodes, "; set SLURM_NTASKS_PER_NODE");
  return world_size / nodes;
}

RendezvousInfo read_ranks(const Convention& c) {
  RendezvousInfo info;
  info.source = c.source;
  info.rank = required_int(c.rank, detail::concat(c.world_size, " is set").c_str());
  info.world_size = required_int(c.world_size, detail::concat(c.rank, " is set").c_str());
  info.local_rank = optional_int(c.local_rank, info.rank);
  info.local_world_size = c.slurm_layout ? slurm_local_world_size(info.world_size)
                                         : optional_int(c.local_world_size, info.world_size);
  DS_CHECK(info.world_size >= 1, CommError, "rendezvous: ", c.world_size, "=", info.world_size,
           " must be >= 1");
  DS_CHECK(info.rank >= 0 && info.rank < info.world_size, CommError, "rendezvous: ", c.rank, "=",
           info.rank, " must be in [0, ", c.world_size, "=", info.world_size, ")");
  DS_CHECK(info.local_world_size >= 1 && info.local_world_size <= info.world_size, CommError,
           "rendezvous: ", c.local_world_size, "=", info.local_world_size, " must be in [1, ",
           c.world_size, "=", info.world_size, "]");
  DS_CHECK(info.local_rank >= 0 && info.local_rank < info.local_world_size, CommError,
           "rendezvous: ", c.local_rank, "=", info.local_rank, " must be in [0, ",
           c.local_world_size, "=", info.local_world_size, ")");
  return info;
}

void read_store_address(RendezvousInfo& info) {
  const bool one_node = info.local_world_size == info.world_size &&
                        (info.source != "slurm" || optional_int("SLURM_NNODES", 1) == 1);
  if (auto addr = env("MASTER_ADDR")) {
    info.master_addr = strings::trim(*addr);
    DS_CHECK(!info.master_addr.empty(), CommError, "rendezvous: MASTER_ADDR is empty");
  } else {
    DS_CHECK(one_node || info.world_size == 1, CommError,
             "rendezvous: MASTER_ADDR is not set and the job (", info.source, ", ", info.world_size,
             " ranks, ", info.local_world_size,
             " per node) spans several nodes: set it to the host of rank 0");
  }
  info.master_port = optional_int("MASTER_PORT", 29500);
  DS_CHECK(info.master_port >= 1 && info.master_port <= 65535, CommError,
           "rendezvous: MASTER_PORT=", info.master_port, " must be in [1, 65535]");
}

// DEEPSHARD_JOB_TOKEN; else what tells this job from another one on the same host and port
// under mpirun (its job id) or srun (job and step ids).
std::string job_token(const std::string& source) {
  if (auto token = env("DEEPSHARD_JOB_TOKEN")) return *token;
  if (source == "openmpi") {
    if (auto id = env("OMPI_MCA_ess_base_jobid")) return "openmpi:" + *id;
  }
  if (source == "slurm") {
    if (auto id = env("SLURM_JOB_ID"))
      return "slurm:" + *id + "." + env("SLURM_STEP_ID").value_or("");
  }
  return "";
}

}  // namespace

RendezvousInfo rendezvous_from_env() {
  const Convention* convention = nullptr;
  if (env("RANK") || env("WORLD_SIZE")) {
    convention = &kTorchrun;
  } else if (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE")) {
    convention = &kOpenMpi;
  } else if (env("SLURM_PROCID")) {
    convention = &kSlurm;
  }
  RendezvousInfo info;
  if (convention != nullptr) {
    info = read_ranks(*convention);
    read_store_address(info);
    info.job_token = job_token(info.source);
  }
  info.socket_ifname = env("GLOO_SOCKET_IFNAME").value_or("");
  return info;
}

}  // namespace deepshard::comm
