// sonde scaling's tables, text and JSON over what compute_scaling read (metrics/scaling.hpp);
// each efficiency is scaling_efficiency's.
#pragma once

#include <string>

#include "base/table_format.hpp"
#include "metrics/scaling.hpp"

namespace sonde::analyzers {

Table scaling_runs_table(const Scaling& s);
Table scaling_routines_table(const Scaling& s);
// The training loops' times (ScalingRun::loop_s), efficiency as the whole run's.
Table scaling_loop_table(const Scaling& s);
std::string render_scaling_text(const Scaling& s);
Json render_scaling_json(const Scaling& s);

}  // namespace sonde::analyzers
