// The one exception the analyzers throw for a user to read; below every layer, so that a helper
// of base/ reports a failure as the profile readers do.
#pragma once

#include <stdexcept>
#include <string>

namespace sonde::analyzers {

// Everything the library reports to a user: one line, no prefix; the CLI adds "sonde <cmd>: ".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

}  // namespace sonde::analyzers
