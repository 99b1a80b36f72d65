// Who this process is in the job: rank, world size and where rank 0 listens, read from the
// environment. torchrun's variables first (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE), then Open MPI's (OMPI_COMM_WORLD_*), then Slurm's (SLURM_*).
// With none of them set the process is a single rank (world size 1). The job token comes from
// DEEPSHARD_JOB_TOKEN (see RendezvousInfo::job_token).
#pragma once

#include <string>

namespace deepshard::comm {

struct RendezvousInfo {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string source = "none";  // "torchrun" | "openmpi" | "slurm" | "none"
  // The secret every rank presents to the rendezvous store (a process presenting another one is
  // refused): DEEPSHARD_JOB_TOKEN (the launcher sets a random one per job), else Open MPI's job
  // id or Slurm's job and step ids (distinct per job, though not secret), else empty.
  std::string job_token;
  // The network interface the ranks' TCP transport binds (GLOO_SOCKET_IFNAME); "": 127.0.0.1 when
  // the job is on one node, else the address that routes to master_addr.
  std::string socket_ifname;
  // The rank in the whole job when this is a sub-group's (whose `rank` is its index among its
  // members); -1: `rank` is the job's.
  int job_rank = -1;
};

// The rank in the whole job of the process `info` describes (what names per-process files: NVMe
// swap folders).
inline int job_rank(const RendezvousInfo& info) {
  return info.job_rank >= 0 ? info.job_rank : info.rank;
}

// Throws CommError naming the variable that is missing or malformed (e.g. RANK set but not
// WORLD_SIZE, or RANK >= WORLD_SIZE).
RendezvousInfo rendezvous_from_env();

}  // namespace deepshard::comm
