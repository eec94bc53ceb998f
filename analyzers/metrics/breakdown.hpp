// The iteration breakdown of the Chu deck: t_io, t_h2d, t_f, t_b, t_u, t_comm, from the calling-
// context trees. Phases are recognised by routine kind (copies, collectives) or by words in
// region and Python function names (forward, backward, update, ...); the classes are data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/metrics.hpp"
#include "profile/profile_file.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {

// How a class recognises its routines.
struct PhaseClass {
  std::string_view id;     // "t_f"
  std::string_view title;  // "forward"
  // A routine of one of these kinds, or of kind cuda whose name holds `cuda_name_part`, belongs
  // to the class wherever it runs, even inside another phase (a copy inside forward is a copy).
  std::span<const std::string_view> kinds;
  std::string_view cuda_name_part;
  // A region or Python function whose name has one of these words (split at '_', '.', case
  // changes, digits) belongs to the class unless an enclosing frame already has one.
  std::span<const std::string_view> words;
};

std::span<const PhaseClass> phase_classes();

// A user's addition: routines whose name matches `glob` (fnmatch) belong to class `id`; checked
// before the built-in words.
struct PhaseMapping {
  std::string id;
  std::string glob;
};
// Parses "t_io=load_*" style arguments; throws Error for an unknown class or a missing '='.
PhaseMapping parse_phase_mapping(std::string_view text);

struct BreakdownRow {
  std::string id, title;
  std::int64_t time_ns = 0;
  std::vector<std::string> routines;  // that opened this class, by time, largest first
};

struct Breakdown {
  std::vector<BreakdownRow> rows;  // one per class, in phase_classes() order, then "other"
  std::int64_t other_ns = 0;       // measured, in no class
  std::int64_t unmeasured_ns = 0;  // the thread roots' own time
  std::int64_t run_ns = 0;         // what shares are taken of (Metrics::run_ns)
  std::int64_t iterations = 0;     // calls that opened t_u, else t_f; 0: unknown
  std::string iterations_from;     // the class counted
};

Breakdown compute_breakdown(const ProfileFile& file, const std::vector<PhaseMapping>& mappings);
Table breakdown_table(const Breakdown& b);

}  // namespace sonde::analyzers
