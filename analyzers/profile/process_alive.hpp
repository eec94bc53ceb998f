// Whether a process a profile names as unfinished (ended_ns NULL) is still running on this host:
// the readers say "still running" of it and the launcher will not move its file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sonde::analyzers {

// True when `pid` runs now as the process that started writing at `started_ns` (the row's
// started_ns, CLOCK_REALTIME). kill(pid, 0) alone answers yes for a zombie (a killed worker
// whose parent never waited, or an orphan under a PID 1 that does not reap, as in containers)
// and for an unrelated process that got the pid later; /proc/PID/stat says both. Without a
// readable /proc (hidepid, another OS) it is kill's answer.
bool process_alive(pid_t pid, std::int64_t started_ns);

// Whether a profile's processes.host names this machine (NULL, an older file's: taken to).
bool on_this_host(const char* host);

// The processes of this user whose environment, as their image started, holds `entry` exactly
// ("SONDE_RUN_ID=<uuid>": the processes of a run, those that have not written their row yet
// among them); none where /proc cannot be read.
std::vector<pid_t> processes_with_environment(const std::string& entry);

}  // namespace sonde::analyzers
