// Facts about the machine and the process recorded with each profile.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "process/redact.hpp"
#include "store/store.hpp"

namespace sonde {

// This process's arguments, as it was started (never stored: read_command_line redacts them).
std::vector<std::string> command_line_args();
// This process's command line, redacted (process/redact.hpp).
std::string read_command_line(bool with_args);
// `command`: read_command_line's, which the process's own row has read already.
RunInfo collect_run_info(const std::string& uuid, const std::string& command, bool trace,
                         int64_t started_ns);
// Allow-listed environment only (known names, never a secret-looking one): profiles get
// shared, and secrets must not travel in them.
std::vector<std::pair<std::string, std::string>> allowed_environment();
bool environment_allowed(const std::string& name);
std::string new_run_uuid();
// The same for every rank of one job: `job` is what the launcher names the job by (RankEnv::job).
std::string job_run_uuid(const std::string& job);

}  // namespace sonde
