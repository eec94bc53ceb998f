#include "base/signal_name.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <utility>

namespace sonde::analyzers {

std::string signal_name(int sig) {
  // Linux's x86-64 numbering, as glibc's sigabbrev_np names them; that function is 2.32's and
  // the wheel's tool runs on 2.31.
  static constexpr std::pair<int, const char*> kNames[] = {
      {SIGHUP, "HUP"},   {SIGINT, "INT"},       {SIGQUIT, "QUIT"}, {SIGILL, "ILL"},
      {SIGTRAP, "TRAP"}, {SIGABRT, "ABRT"},     {SIGBUS, "BUS"},   {SIGFPE, "FPE"},
      {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},     {SIGSEGV, "SEGV"}, {SIGUSR2, "USR2"},
      {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},     {SIGTERM, "TERM"}, {SIGSTKFLT, "STKFLT"},
      {SIGCHLD, "CHLD"}, {SIGCONT, "CONT"},     {SIGSTOP, "STOP"}, {SIGTSTP, "TSTP"},
      {SIGTTIN, "TTIN"}, {SIGTTOU, "TTOU"},     {SIGURG, "URG"},   {SIGXCPU, "XCPU"},
      {SIGXFSZ, "XFSZ"}, {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGWINCH, "WINCH"},
      {SIGPOLL, "POLL"}, {SIGPWR, "PWR"},       {SIGSYS, "SYS"}};
  for (auto [number, abbrev] : kNames) {
    if (number == sig) return fmt::format("SIG{}", abbrev);
  }
  return fmt::format("signal {}", sig);
}

}  // namespace sonde::analyzers
