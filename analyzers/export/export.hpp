// `sonde export`: the profile in formats other tools read.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "base/progress.hpp"
#include "profile/call_tree.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// Folded stacks (flamegraph.pl, speedscope, inferno): the `callpaths` view's paths (frames
// root-first joined by ';', no thread root), value = exclusive microseconds merged over threads,
// in the view's order (path, then path_ids), zero values left out; then the busy threads' roots.
// Walked from the nodes in memory, linear in them, written as it goes.
void write_folded(const ProfileFile& file, std::ostream& out);

// The `callpaths` view as CSV (path,calls,incl_s,excl_s,path_ids), sorted by path, then
// path_ids: what `sonde query FILE "SELECT ... FROM callpaths ORDER BY path, path_ids"` writes,
// walked from the nodes as write_folded() walks them.
void write_callpaths_csv(const ProfileFile& file, std::ostream& out);

// Chrome trace-event JSON (Perfetto, chrome://tracing). Real events when the file has trace
// events; otherwise a flame-chart layout of the aggregated tree, labelled as such in otherData.
// Each call path is written once, in the top-level `stackFrames` dictionary; an event names its
// path by `sf`.
void write_chrome_trace(const ProfileFile& file, std::ostream& out, Progress* progress = nullptr);

// speedscope's own file format (https://www.speedscope.app/file-format-schema.json): one profile
// per thread, `evented` from the trace events when the file has them, else `sampled` with one
// sample per call path weighted by its exclusive nanoseconds; frames shared by all profiles.
void write_speedscope(const ProfileFile& file, std::ostream& out, Progress* progress = nullptr);

// cProfile's stats file (pstats, snakeviz, tuna, gprof2dot): a marshal'd dict keyed by
// (file, line, function), figures from the routine_edges view; binary.
void write_pstats(const ProfileFile& file, std::ostream& out);

// The callgrind format (KCachegrind, callgrind_annotate): self time per routine, calls and
// their cumulative time per caller-callee pair (the routine_edges view), in nanoseconds.
void write_callgrind(const ProfileFile& file, std::ostream& out);

// pprof's profile.proto, gzip-compressed (go tool pprof, Pyroscope, Parca): one sample per
// node of the busy threads' trees, its stack leaf first down to the thread root, valued in
// calls, exclusive nanoseconds and FLOPs where counted.
void write_pprof(const ProfileFile& file, std::ostream& out);

// A static SVG flame graph of the busy threads' merged tree (the `callpaths` view): widths by
// inclusive time, colours by kind, a <title> tooltip per frame, no script.
// `before`: a differential flame graph, widths from `file`, each frame's colour the change of
// its call path's share of the busy time from `before` (matched by the frames' names).
void write_svg_flamegraph(const ProfileFile& file, std::ostream& out,
                          const ProfileFile* before = nullptr);

}  // namespace sonde::analyzers
