// Colour where it helps a reader at a terminal (the report's header, the candidates, the tree's
// and the metrics' headings, diff's changes), never in a pipe or a file unless asked for
// (--color=always), and never with NO_COLOR set (no-color.org) or TERM=dumb. The renderers write
// plain text; the commands paint it here, so every other output stays byte-identical.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace sonde::analyzers {

// --color: kAuto paints a terminal only (below); kAlways paints a pipe or a file too (`| less
// -R`, a CI log that renders escapes); kNever paints nothing. One setting per process.
enum class ColourMode { kAuto, kAlways, kNever };
void set_colour_mode(ColourMode mode);
// "auto", "always", "never" (what --color accepts).
ColourMode colour_mode_named(std::string_view name);

// kAlways; kNever: no; kAuto: `out` is a terminal, NO_COLOR is unset or empty, and TERM is not
// "dumb" (or, off a terminal, CLICOLOR_FORCE is set and not "0", as other tools read it).
bool colour_wanted(std::FILE* out);

// `sonde report`'s text: the header's labels bold, warnings yellow, the table's heading bold.
std::string colour_report(std::string_view text);

// `sonde candidates`' text: each candidate's first line bold, its rule cyan and its gain green;
// the evidence, bound and advice labels dim.
std::string colour_candidates(std::string_view text);

// `sonde tree`'s text: each thread's title and the column heading bold.
std::string colour_tree(std::string_view text);

// `sonde metrics`' text: section headings bold, warnings yellow.
std::string colour_metrics(std::string_view text);

}  // namespace sonde::analyzers
