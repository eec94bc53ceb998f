// ROUTINE as a user names it on the command line (`sonde tree --callers ROUTINE`).
#pragma once

#include <string_view>

#include "profile/hotspots.hpp"

namespace sonde::cli {

// The row of the routine named `spec`: its display name (`cblas_sgemm`, `prog.py:10(helper)`)
// or a Python frame's function name (`helper`), or, where several routines share it, NAME@WHERE
// with WHERE the end of its file:line or library
// (`step@one/model.py:2`). Throws Error (exit 2) for an unknown name, with the nearest name
// or the names containing it, and for an ambiguous one, listing each as NAME@WHERE.
const analyzers::HotspotRow& pick_routine(const analyzers::Hotspots& h, std::string_view spec);

}  // namespace sonde::cli
