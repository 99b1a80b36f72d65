// The job token the launcher hands its ranks (DEEPSHARD_JOB_TOKEN): the one in the launcher's own
// environment (every node of a multi-node job must share it), else the id of the Slurm job step or
// Open MPI job the launchers run in (the same on every node, though not secret), else 128 random
// bits from the kernel for a one-node job. The ranks present it to the rendezvous store, which
// refuses any process presenting another one (src/comm/store_server.h).
#include <sys/random.h>

#include <cstdio>
#include <string>

#include "deepshard/util/error.h"
#include "launch/launcher.h"

namespace deepshard::launch {

std::string job_token(const LaunchOptions& options) {
  const LaunchEnvironment& e = options.environment;
  if (e.job_token) return *e.job_token;
  // Launchers started on every node by srun or mpirun share their job's id.
  if (e.slurm_job_id) return "slurm:" + *e.slurm_job_id + "." + e.slurm_step_id.value_or("");
  if (e.openmpi_job_id) return "openmpi:" + *e.openmpi_job_id;
  DS_CHECK(options.nnodes == 1, UsageError, "--nnodes ", options.nnodes,
           ": set DEEPSHARD_JOB_TOKEN to the same secret for the launcher of every node (e.g. "
           "DEEPSHARD_JOB_TOKEN=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \\n')); the "
           "rendezvous store admits only ranks presenting it");
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    DS_CHECK(n > 0, Error, "launch: getrandom() failed while making the job token");
    got += size_t(n);
  }
  std::string token;
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof(hex), "%02x", b);
    token += hex;
  }
  return token;
}

}  // namespace deepshard::launch
