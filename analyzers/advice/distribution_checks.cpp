#include "advice/distribution_checks.hpp"

#include "advice/outermost_frames.hpp"

namespace sonde::analyzers {

DistributionChecks load_distribution_checks(const ProfileFile& file) {
  // The checks are constraints.py's check and distribution.py's _validate_sample; outermost:
  // a check under another (log_prob's _validate_sample calling support.check, an independent
  // constraint calling its base's) is inside its caller's time.
  OutermostFrames f = outermost_frames(
      file,
      "kind = 'python' AND ("
      "  (instr(file, 'torch/distributions/constraints.py') > 0 AND name LIKE '%(check)') OR"
      "  (instr(file, 'torch/distributions/distribution.py') > 0"
      "   AND name LIKE '%(\\_validate\\_sample)' ESCAPE '\\'))");
  return {f.ns, f.calls, f.caller};
}

}  // namespace sonde::analyzers
