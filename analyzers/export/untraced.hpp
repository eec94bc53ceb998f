// The processes of a file with trace events that recorded none (a child run with
// SONDE_TRACE=0, an exec'd image that turned it off, files of traced and untraced runs merged):
// the timeline exports lay their trees out instead, so that no process is left out.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct Untraced {
  // Threads (thread_id) of processes with no trace event; empty where the file has none at
  // all, or every process has some.
  std::set<std::int64_t> threads;
  // Per track (pid, tid), where its trace events end, in ns from the file's first event: an
  // untraced image on the track of a traced one (exec) starts after them, not over them.
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> events_end;
};

// By process (processes.process_id), not pid: an exec'd image shares its pid with the one it
// replaced, and merged runs may share pids.
Untraced load_untraced(const ProfileFile& file);

}  // namespace sonde::analyzers
