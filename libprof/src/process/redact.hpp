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
// The same, word by word: argv[0] as it is, the arguments redacted.
std::vector<std::string> redact_words(const std::vector<std::string>& argv);
// A name containing TOKEN, SECRET, KEY, PASSWORD, PASS, CREDENTIAL or AUTH, in any case.
bool name_looks_secret(std::string_view name);

}  // namespace sonde
