#include "process/signals.hpp"

#include <dlfcn.h>
#include <signal.h>

#include "runtime/runtime.hpp"

namespace sonde {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT,
                            SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGXCPU};


void on_signal(int sig, siginfo_t*, void*) {
  if (Runtime* rt = Runtime::get()) rt->flush_from_signal(sig);
  // SA_RESETHAND restored the default action: dying now looks exactly as it would have.
  raise(sig);
}

}  // namespace

void install_signal_handlers() {
  // CPython turns SIGINT into KeyboardInterrupt only if it finds SIGINT at its default: a
  // handler of ours would turn Ctrl-C into death. Python exits through atexit instead.
  bool python_host = dlsym(RTLD_DEFAULT, "Py_InitializeEx") != nullptr;
  for (int sig : kSignals) {
    if (sig == SIGINT && python_host) continue;
    struct sigaction old{};
    if (sigaction(sig, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa{};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace sonde
