// Flush on the signals that end a process by default (SIGINT, SIGTERM, crashes), then die of
// the same signal, so the exit status is what it would have been without sonde.
#pragma once

namespace sonde {

// Installs handlers only where the disposition is still the default: a host that handles a
// signal itself keeps doing so (and its process then exits through atexit, which flushes).
void install_signal_handlers();


}  // namespace sonde
