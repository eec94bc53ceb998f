// What the distribution-checks rule knows: the time torch.distributions spent checking
// arguments and samples against their constraints (Distribution(validate_args), on by default
// outside python -O): Distribution.__init__'s checks of each parameter and log_prob's
// _validate_sample, each call of a Categorical in an RL loop. A red-team REINFORCE loop spent
// 0.48 s of its 10.2 s in constraints' check alone, and no rule said anything.
#pragma once

#include <cstdint>
#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct DistributionChecks {
  std::int64_t ns = 0;     // the outermost checks' inclusive time, every thread
  std::int64_t calls = 0;  // their calls
  std::string caller;      // the routine that called the checks the longest
};

DistributionChecks load_distribution_checks(const ProfileFile& file);

}  // namespace sonde::analyzers
