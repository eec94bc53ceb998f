#include "core/window.hpp"

#include <cstdio>
#include <cstring>

#include "core/clock.hpp"

namespace sonde {

std::atomic<bool> g_window_closed{false};

namespace {
// Plain data, set from the library constructor, which may run before this file's dynamic
// initialisers would (a std::string here was reset after window_init had set it).
double g_delay_s = 0;
uint64_t g_step_count = 0;
char g_step_region[128] = "";
bool g_requested = false;
int64_t g_deadline_ns = 0;  // monotonic; 0: no delay
std::atomic<int64_t> g_opened_ns{0};
std::atomic<uint64_t> g_steps{0};

// `at`: when it opened (the delay's deadline, which the first call after it only notices).
void open_now(int64_t at) {
  int64_t expected = 0;
  g_opened_ns.compare_exchange_strong(expected, at, std::memory_order_relaxed);
  g_window_closed.store(false, std::memory_order_release);
}
}  // namespace

void window_init(const WindowSpec& spec, int64_t started_mono_ns) {
  g_delay_s = spec.delay_s;
  g_step_count = spec.steps;
  std::snprintf(g_step_region, sizeof g_step_region, "%s", spec.step_region.c_str());
  g_requested = spec.delay_s > 0 || spec.steps > 0;
  if (!g_requested) return;
  // Steps take precedence: a delay and a step count together would be two windows.
  g_deadline_ns = spec.steps > 0 ? 0 : started_mono_ns + int64_t(spec.delay_s * 1e9);
  g_window_closed.store(true, std::memory_order_release);
}

bool window_still_closed() {
  if (g_deadline_ns == 0 || monotonic_ns() < g_deadline_ns) {
    return g_window_closed.load(std::memory_order_acquire);
  }
  open_now(g_deadline_ns);
  return false;
}

bool window_region_begins(const char* name) {
  if (!window_closed()) return true;
  if (g_step_count == 0 || name == nullptr || std::strcmp(g_step_region, name) != 0) return false;
  // Every thread's begins count: the step that opens the window is the (steps+1)-th of all.
  if (g_steps.fetch_add(1, std::memory_order_relaxed) + 1 <= g_step_count) return false;
  open_now(monotonic_ns());
  return true;
}

bool window_requested() { return g_requested; }
int64_t window_opened_mono_ns() { return g_opened_ns.load(std::memory_order_relaxed); }
uint64_t window_steps_seen() { return g_steps.load(std::memory_order_relaxed); }
WindowSpec window_spec() { return {g_delay_s, g_step_count, g_step_region}; }

}  // namespace sonde
