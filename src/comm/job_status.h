// What this process knows about the job's health: the reason a rank was lost, as soon as the
// rendezvous store says so (JobWatch records it). A collective that fails because a peer died
// adds it to its error, so every rank's message names the lost rank, however the failure
// surfaced (a reset connection, a timeout, or the watch itself).
#pragma once

#include <chrono>
#include <string>

namespace deepshard::comm {

// Records why the job stops (the first call wins).
void note_job_lost(const std::string& reason);
// The recorded reason, waiting up to `wait` for one; "" if none.
std::string job_lost_reason(std::chrono::milliseconds wait);

}  // namespace deepshard::comm
