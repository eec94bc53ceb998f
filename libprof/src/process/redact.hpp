// Secret-looking values kept out of the command line a profile records (docs/reliability.md,
// "Configuration and secrets").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sonde {

// The command line as recorded: values of secret-looking arguments (`--password=x`,
// `--api-key x`, `TOKEN=x`, URL passwords and signatures) replaced by <redacted>; without args,
// the program's name only.
std::string redact_arguments(const std::vector<std::string>& argv, bool with_args);
// A name containing TOKEN, SECRET, KEY, PASSWORD, PASS, CREDENTIAL or AUTH, in any case.
bool name_looks_secret(std::string_view name);

}  // namespace sonde
