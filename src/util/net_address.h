// This host's addresses as the network sees them: the local address a connection to a given host
// would leave from (the kernel's route choice), and the interface that holds an address. For
// choosing the address other nodes reach a rank at, and for saying which one was chosen.
#pragma once

#include <optional>
#include <string>

namespace deepshard::net {

// The IPv4 address of this host that a connection to `host`:`port` would use (a UDP connect()
// only picks the route; nothing is sent). nullopt when `host` does not resolve or no route leads
// to it.
std::optional<std::string> local_address_towards(const std::string& host, int port);

// The name of the interface holding IPv4 `address` ("eth0"), nullopt if none does.
std::optional<std::string> interface_of(const std::string& address);

// 127.0.0.0/8.
bool is_loopback(const std::string& address);

}  // namespace deepshard::net
