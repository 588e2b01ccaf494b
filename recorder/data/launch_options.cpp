#include "recorder/data/launch_options.h"

namespace cprr {

std::string_view launcher_name(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::local:
      return "local";
    case LauncherKind::mpirun:
      return "mpirun";
    case LauncherKind::srun:
      return "srun";
  }
  return "?";
}

std::optional<LauncherKind> parse_launcher(std::string_view name) {
  for (LauncherKind k : {LauncherKind::local, LauncherKind::mpirun, LauncherKind::srun}) {
    if (launcher_name(k) == name) return k;
  }
  return std::nullopt;
}

bool LaunchOptions::all_local() const {
  if (kind != LauncherKind::mpirun || !hosts.empty()) return false;
  for (std::string_view a : extra) {
    while (a.starts_with('-')) a.remove_prefix(1);
    if (a == "H" || a.starts_with("host") || a.starts_with("machinefile")) return false;
  }
  return true;
}

}  // namespace cprr
