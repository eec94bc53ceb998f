// Colour where it helps a reader at a terminal (the report's header, the candidates), never in a
// pipe or a file, and never with NO_COLOR set (no-color.org) or TERM=dumb. The renderers write
// plain text; the commands paint it here, so every other output stays byte-identical.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace sonde::analyzers {

// `out` is a terminal, NO_COLOR is unset or empty, and TERM is not "dumb".
bool colour_wanted(std::FILE* out);

// `sonde report`'s text: the header's labels bold, warnings yellow, the table's heading bold.
std::string colour_report(std::string_view text);

// `sonde candidates`' text: each candidate's first line bold, its rule cyan and its gain green;
// the evidence, bound and advice labels dim.
std::string colour_candidates(std::string_view text);

}  // namespace sonde::analyzers
