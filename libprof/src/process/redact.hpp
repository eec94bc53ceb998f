// Secret-looking values kept out of the command line a profile records (docs/reliability.md,
// "Configuration and secrets").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sonde {

// The command line as recorded: values of secret-looking arguments (`--password=x`,
// `--api-key x`, `TOKEN=x`, URL passwords and signatures) replaced by <redacted>; without args,
// the program's name only. Each word is quoted as a POSIX shell would need it (`'my run'`), so
// the line says where one argument ends; <redacted> stays bare.
std::string redact_arguments(const std::vector<std::string>& argv, bool with_args);
// The same, word by word: argv[0] as it is, the arguments redacted.
std::vector<std::string> redact_words(const std::vector<std::string>& argv);
// One word as a POSIX shell reads it literally: bare where it can be, else in single quotes.
std::string shell_word(const std::string& word);
// Words joined by spaces, each as shell_word writes it: what shell_words reads back.
std::string shell_line(const std::vector<std::string>& words);
// A recorded command line's words again: what shell_word quoted read back (single quotes and
// backslashes; a line recorded before quoting splits at its spaces, as it was joined).
std::vector<std::string> shell_words(const std::string& line);
// A name containing TOKEN, SECRET, KEY, PASSWORD, PASS, CREDENTIAL or AUTH, in any case.
bool name_looks_secret(std::string_view name);

}  // namespace sonde
