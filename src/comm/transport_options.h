// Choosing the transport of a group (docs/comm.md): Gloo over TCP, or a shared-memory segment when
// every rank is on this host. Group::create(info, timeout) is create_group with kAuto.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::comm {

// kAuto: shared memory when every rank is on this host (and the segment can be made; otherwise a
// warning and Gloo), Gloo when the job spans hosts. kShm on a job spanning hosts is an error.
enum class TransportKind { kAuto, kGloo, kShm };

// "auto" | "gloo" | "shm"; throws CommError naming `where` and the accepted values otherwise.
TransportKind parse_transport(const std::string& text, const std::string& where);
const char* to_string(TransportKind kind);

struct GroupOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // rendezvous and every collective
  TransportKind transport = TransportKind::kAuto;
};

std::unique_ptr<Group> create_group(const RendezvousInfo& info, const GroupOptions& options);

// A group of some ranks of `world` (one axis of the rank grid, deepshard/parallel/): `members` are
// ranks of `world`, ascending, this rank among them; the new group's rank r is members[r]. Every
// rank of `world` calls this for its own group at the same point of its program; `name` must be
// the same within a group and differ between the groups made from `world` ("tensor/1"): the
// group rendezvouses through the world's store under that prefix, so its Gloo pairs and its
// shared-memory segment are its own. One member: a local group. Throws CommError naming the group.
std::unique_ptr<Group> create_subgroup(const Group& world, const std::vector<int>& members,
                                       const std::string& name, const GroupOptions& options);

// The transport a group runs on: "local" (one rank), "gloo" or "shm".
const char* transport_name(const Group& group);

}  // namespace deepshard::comm
