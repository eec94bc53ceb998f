#include "symbols/loader_free.hpp"

namespace sonde {
namespace {
// Initial-exec, as every TLS libsonde reads in a signal's flush: the default model reached it
// through __tls_get_addr, whose first call on the flusher after the program had loaded more
// libraries (torch's) grew the thread's TLS vector with malloc, and waited for malloc's main
// arena, which the thread the SIGTERM interrupted held (inside a free): the handler waited for
// the flusher, the flusher for it, and after 3 s the process died without its profile (1 run
// in 30-120 of a torch loop killed after 30 steps; stacks read from /proc during the wait).
constinit thread_local bool t_loader_free __attribute__((tls_model("initial-exec"))) = false;
}  // namespace

LoaderFree::LoaderFree() : outer_(t_loader_free) { t_loader_free = true; }
LoaderFree::~LoaderFree() { t_loader_free = outer_; }

bool loader_free() { return t_loader_free; }

}  // namespace sonde
