#include "data/launch_options.h"

namespace cprr {

bool LaunchOptions::all_local() const {
  if (kind != LauncherKind::mpirun || !hosts.empty()) return false;
  for (std::string_view a : extra) {
    while (a.starts_with('-')) a.remove_prefix(1);
    if (a == "H" || a.starts_with("host") || a.starts_with("machinefile")) return false;
  }
  return true;
}

}  // namespace cprr
