// The thread-local state of the measurement: the only globals besides the runtime singleton.
// initial-exec TLS: one fs-relative load on the hot path (libsonde is preloaded, so the static
// TLS block has room for it).
#pragma once

#include "core/thread_state.hpp"

namespace sonde {

// constinit: no dynamic initialisation, so other files read them without asking for the TLS
// init function first (a test and a branch on every inlined probe).
extern constinit thread_local ThreadState* t_state __attribute__((tls_model("initial-exec")));
// Set on sonde's own threads (the flusher): they are never measured.
extern constinit thread_local bool t_internal __attribute__((tls_model("initial-exec")));

}  // namespace sonde
