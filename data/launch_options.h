#pragma once
// How a run's worlds start their ranks (cprecord --launcher and its options), as plain data: the
// run records it (schema run.launcher) and cpreplay starts its worlds the same way. What the
// options turn into is recorder/engine/launcher.h; their names are in text_forms.h.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cprr {

enum class LauncherKind : uint8_t { local, mpirun, srun };

/// What cprecord --launcher and its options say (recorded in the run; cpreplay reuses them).
struct LaunchOptions {
  LauncherKind kind = LauncherKind::local;
  /// The launcher's executable; empty: "mpirun" or "srun" found on PATH.
  std::string program;
  /// Hosts to run ranks on (mpirun --host, srun --nodelist); empty: the launcher's default
  /// (mpirun: this host; srun: the allocation).
  std::vector<std::string> hosts;
  std::string partition;  ///< srun --partition (empty: the default)
  /// Ranks (and GPUs) per node: mpirun --map-by ppr:N:node, srun --ntasks-per-node=N
  /// --gpus-per-node=N; 0: the launcher's default.
  int gpus_per_node = 0;
  /// Passed to the launcher verbatim, before the rank command (--launcher-arg, repeatable).
  std::vector<std::string> extra;
  /// ADDR[:PORT] the controller listens on for ranks; empty: 127.0.0.1 when every rank runs on
  /// this host (mpirun without hosts), else every interface; port 0: any free port.
  std::string listen;
  /// The host name or address ranks connect to; empty: the listen address when it is one
  /// address, else this host's name.
  std::string advertise;
  /// A directory every rank's host sees (the CPU backend's rendezvous store, flight records);
  /// empty: the temp directory, which only ranks on this host see.
  std::string shared_dir;

  bool operator==(const LaunchOptions&) const = default;
  bool over_tcp() const { return kind != LauncherKind::local; }
  /// Whether every rank runs on the controller's host: mpirun without hosts, neither in
  /// --hosts nor in a host option passed through --launcher-arg (--host, -H, --hostfile,
  /// --machinefile and their one-dash forms).
  bool all_local() const;
};

}  // namespace cprr
