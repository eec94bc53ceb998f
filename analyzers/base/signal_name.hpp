// How sonde's readers and launchers name a signal.
#pragma once

#include <string>

namespace sonde::analyzers {

// "SIGTERM", or "signal N" for one without an abbreviation.
std::string signal_name(int sig);

}  // namespace sonde::analyzers
