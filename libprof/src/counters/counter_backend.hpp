// A source of per-thread event counts (PAPI on CPU; perf_event_open for the kernel's software
// events where PAPI cannot), read at every enter and exit of a measured frame when
// SONDE_COUNTERS names events. The runtime owns one backend; each thread gets its own handle. With
// no events asked for, no backend exists and the hot path pays one predictable branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sonde {

inline constexpr uint32_t kMaxCounters = 4;

// Set when a seccomp filter comes over every thread (SECCOMP_FILTER_FLAG_TSYNC): a read is a
// system call the filter may kill for, so each thread stops counting at its next read instead
// (frame_ops.hpp). A filter on one thread stops that thread's counters directly.
inline std::atomic<bool> g_counters_halted{false};

class CounterBackend {
 public:
  virtual ~CounterBackend() = default;
  virtual const char* name() const = 0;
  // The events that will be counted (those asked for that exist here), at most kMaxCounters.
  virtual const std::vector<std::string>& events() const = 0;
  // Called on the thread itself; returns a handle, or -1 when counting failed for it.
  virtual int start_thread() = 0;
  // Hot path: the current counts of this thread's events, in events() order.
  virtual bool read(int handle, uint64_t* values) = 0;
  // Called on the thread as it ends: what start_thread opened for it can go.
  virtual void stop_thread(int /*handle*/) {}
};

using NoteSink = std::function<void(const std::string& topic, const std::string& message)>;

// True, after a note naming `name`, when `counted` events already fill the counters.
bool counters_full(size_t counted, const std::string& name, const NoteSink& note);

// PAPI with the given event names (presets or native). Events that do not exist are reported
// once through `note`, with PAPI's own error string, and skipped; nullptr when none is left or
// PAPI is unusable (also noted).
std::unique_ptr<CounterBackend> make_papi_backend(const std::vector<std::string>& names,
                                                  const NoteSink& note);

// Where PAPI's perf_event component is disabled (`papi_reason` says why), the Linux software
// events among `names` (perf::TASK-CLOCK, perf::PAGE-FAULTS, ...) are read through
// perf_event_open by this backend instead; make_papi_backend hands over to it.
std::unique_ptr<CounterBackend> make_perf_software_backend(const std::vector<std::string>& names,
                                                           const std::string& papi_reason,
                                                           const NoteSink& note);

}  // namespace sonde
