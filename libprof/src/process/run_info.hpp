// Facts about the machine and the process recorded with each profile.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "store/store.hpp"

namespace sonde {

std::string read_command_line();
RunInfo collect_run_info(const std::string& uuid, bool trace, int64_t started_ns);
// Allow-listed environment only: profiles get shared, and secrets must not travel in them.
std::vector<std::pair<std::string, std::string>> allowed_environment();
bool environment_allowed(const std::string& name);
std::string new_run_uuid();

}  // namespace sonde
