// Whether a process a profile names as unfinished (ended_ns NULL) is still running on this host:
// the readers say "still running" of it and the launcher will not move its file.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace sonde::analyzers {

// True when `pid` runs now as the process that started writing at `started_ns` (the row's
// started_ns, CLOCK_REALTIME). kill(pid, 0) alone answers yes for a zombie (a killed worker
// whose parent never waited, or an orphan under a PID 1 that does not reap, as in containers)
// and for an unrelated process that got the pid later; /proc/PID/stat says both. Without a
// readable /proc (hidepid, another OS) it is kill's answer.
bool process_alive(pid_t pid, std::int64_t started_ns);

}  // namespace sonde::analyzers
