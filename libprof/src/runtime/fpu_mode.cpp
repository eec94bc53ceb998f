#include "runtime/fpu_mode.hpp"

#include <atomic>
#include <cstdlib>

#include "runtime/config.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sonde {
namespace {

enum : int { kUndecided = 0, kOff = 1, kOn = 2 };
std::atomic<int> g_mode{kUndecided};

void set_here() {
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned kFtz = 1u << 15, kDaz = 1u << 6;
  _mm_setcsr(_mm_getcsr() | kFtz | kDaz);
#endif
}

}  // namespace

void set_fpu_mode(bool ftz) {
  g_mode.store(ftz ? kOn : kOff, std::memory_order_relaxed);
  if (ftz) set_here();
}

void apply_fpu_mode() {
  int mode = g_mode.load(std::memory_order_relaxed);
  if (mode == kUndecided) {
    mode = ftz_requested([](const char* name) -> const char* { return std::getenv(name); }) ? kOn
                                                                                            : kOff;
    int expected = kUndecided;
    if (!g_mode.compare_exchange_strong(expected, mode, std::memory_order_relaxed)) mode = expected;
  }
  if (mode == kOn) set_here();
}

}  // namespace sonde
