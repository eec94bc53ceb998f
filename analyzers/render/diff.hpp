// sonde diff's tables, text and JSON over what compute_diff found (metrics/diff.hpp).
#pragma once

#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "metrics/diff.hpp"

namespace sonde::analyzers {

Table diff_table(const std::vector<DiffRow>& rows);
Table shape_diff_table(const std::vector<ShapeDiffRow>& rows);
// `sonde diff --format csv`: the phases and the routines in one table, a `section` column first
// (phase, routine); the GEMM shapes are in the JSON.
Table diff_csv_table(const ProfileDiff& diff);
std::string render_diff_text(const ProfileDiff& diff);
Json render_diff_json(const std::vector<std::string>& before_paths,
                      const std::vector<std::string>& after_paths, const ProfileDiff& diff);
Json render_diff_json(const std::string& before_path, const std::string& after_path,
                      const ProfileDiff& diff);

}  // namespace sonde::analyzers
