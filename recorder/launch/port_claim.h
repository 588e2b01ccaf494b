#pragma once
// The MASTER_PORT a job's worlds get (torchrun's rendezvous port, which a suite's own TCPStore
// binds): one no other cprr process on this host uses while the claim lives, and free when it was
// claimed. Two cprecord runs side by side (two CI jobs, ctest's parallel tests), each with
// --jobs, must never hand two worlds one port.
//
// A claim is an abstract-namespace Unix socket named after the port ("cprr-master-port-N"): the
// kernel lets one process bind a name at a time and frees it when that process ends, however it
// ends, so a crashed cprecord leaves no stale claim and no file behind. A port is also probed with
// a TCP bind, so one that something outside cprr holds (a rank left over, another service) is
// passed over. The port itself is not held: the case's suite must be able to bind it.
#include <string>
#include <utility>
#include <vector>

#include "runtime/fd.h"

namespace cprr {

/// torchrun's default MASTER_PORT, where claims start unless the caller gives a base.
inline constexpr int kDefaultMasterPort = 29500;

/// Where claims start: CPRR_MASTER_PORT from this process's environment, else MASTER_PORT (a
/// caller inside a torchrun-style environment), else kDefaultMasterPort. Throws UsageError naming
/// the variable when it is set to something that is not a port.
int master_port_base();

class PortClaim {
 public:
  /// The first port from `preferred` (in order; 0s skipped), then from `base` upward, that no
  /// other cprr process claims and nothing is bound to. Throws when none of 1000 ports from
  /// `base` is free.
  static PortClaim first_free(int base, const std::vector<int>& preferred = {});

  int port() const { return port_; }

 private:
  PortClaim(UniqueFd name, int port) : name_(std::move(name)), port_(port) {}
  UniqueFd name_;  ///< the bound abstract socket: the claim itself
  int port_ = 0;
};

/// `n` claims from `base`, each a port of its own.
std::vector<PortClaim> claim_ports(int n, int base);

}  // namespace cprr
