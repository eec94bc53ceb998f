// The last resort of a process that holds every descriptor its hard limit allows, which sonde
// may not raise (no CAP_SYS_RESOURCE: this VM's root, Docker's default capabilities): the last
// flush is written by a child. A child has a descriptor table of its own, a copy of the
// parent's: it closes some of the host's there, which closes nothing of the parent's (a POSIX
// lock is the process's, a socket or pipe ends with its last descriptor, and the parent holds
// them all), and opens sonde's files in their place.
#pragma once

#include <functional>
#include <string>

namespace sonde {

// Runs `write` in a child made by _Fork (no atfork handler of the host's runs: OpenBLAS's
// would stop its threads), every signal blocked there, after closing `spare` of the child's
// highest descriptors. The child's `write` fills `error` on failure; it is copied back through
// shared memory, 255 bytes at most. False where the child could not be made, failed, or had
// not ended within `timeout_ms` (it is then killed: another thread held a lock it needed, such
// as malloc's, at the fork).
bool write_in_child(unsigned spare, int timeout_ms, const std::function<bool(std::string&)>& write,
                    std::string& error);

}  // namespace sonde
