// Facts about the machine and the process recorded with each profile.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/store.hpp"

namespace sonde {

// The command line as recorded: values of secret-looking arguments (`--password=x`,
// `--api-key x`, `TOKEN=x`) replaced by <redacted>; without args, the program's name only.
std::string read_command_line(bool with_args);
std::string redact_arguments(const std::vector<std::string>& argv, bool with_args);
// A name containing TOKEN, SECRET, KEY, PASSWORD, PASS, CREDENTIAL or AUTH, in any case.
bool name_looks_secret(std::string_view name);
RunInfo collect_run_info(const std::string& uuid, bool trace, bool record_args,
                         int64_t started_ns);
// Allow-listed environment only (known names, never a secret-looking one): profiles get
// shared, and secrets must not travel in them.
std::vector<std::pair<std::string, std::string>> allowed_environment();
bool environment_allowed(const std::string& name);
std::string new_run_uuid();
// The same for every rank of one job: `job` is what the launcher names the job by (RankEnv::job).
std::string job_run_uuid(const std::string& job);

}  // namespace sonde
