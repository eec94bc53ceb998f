// The viewer's timeline: trace mode's events (`trace_events`, one per call) and the GPU's timed
// work (`gpu_activity`) as columns of integers, so that a million events are a few tens of MB
// of JSON the page turns into typed arrays, and figures the page shows are the tables' own:
// an event's start and duration are its row's start_ns and end_ns - start_ns.
#pragma once

#include <cstddef>
#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// Events carried at most: the served part (1M events are ~30 MB of JSON and ~1 s of the
// browser's time to parse) and the --html file's (~9 MB, beside the rest of the bundle). Past
// the cap, the events that start first are carried, none cut in two, and the part says where
// it stops.
inline constexpr std::size_t kViewTimelineEvents = 2'000'000;
inline constexpr std::size_t kViewTimelineHtmlEvents = 300'000;

// {"origin_ns": the first event's CLOCK_REALTIME start (a string: it is past 2^53), "end_ns": the
// last carried end after it,
//  "events": all timed events in the file, "carried", "cut_ns": where the carried ones stop
//  (null: all carried), "max_events", "dropped": trace_drops' sum,
//  "lanes": [{"kind": "thread", "thread_id", "pid", "tid", "seq", "name", "depths", "events"} or
//            {"kind": "stream", "process_id", "pid", "device", "stream", "depths": 1, "events"}],
//  "frames": {"name": [], "kind": [], "where": [], "routine_id": [null for GPU work]},
//  "nodes": {"parent": [node index or -1 under the thread's root], "frame": []},
//  "lane": [], "depth": [], "frame": [], "node": [-1: a launch sonde did not see],
//  "start": [ns after origin_ns], "dur": [ns]}
// Events are by lane, then start, the longer first; a thread's event's depth is its call path's
// below the thread's root (0: called from the root), a GPU event's 0 and its node the call path
// that launched it. "null" when the file has no timed event.
std::string timeline_json(const ProfileFile& file, std::size_t max_events);

}  // namespace sonde::analyzers
