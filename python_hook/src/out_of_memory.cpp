#include "out_of_memory.hpp"

#include <exception>

#include "sonde/probe.hpp"

namespace sonde::python {

void starve_hooks() noexcept {
  if (g_starved) return;
  g_starved = true;
  // Nothing allocated now: the note is made by the next flush with memory for it.
  sonde::add_run_note_later("memory",
                            "the process ran out of memory in the Python hook: Python frames were "
                            "not recorded from then on (native calls were); their time is in "
                            "the frames open at that moment");
}

void prepare_thread_for_exceptions() noexcept {
  // Stored to a volatile: libstdc++ declares the function pure, so an unused call is dropped.
  volatile int uncaught = std::uncaught_exceptions();
  (void)uncaught;
}

}  // namespace sonde::python
