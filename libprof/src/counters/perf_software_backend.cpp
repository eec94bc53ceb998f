// The kernel's software events (perf::TASK-CLOCK, perf::PAGE-FAULTS, ...) read through
// perf_event_open, for machines where PAPI's perf_event component is disabled. PAPI disables it
// whole when libpfm4 finds no core PMU for the CPU (a CPU newer than the library, such as AMD
// Zen 5 with Debian 12's libpfm4 4.13), and the software events, which need no PMU, go with it.
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "counters/counter_backend.hpp"

namespace sonde {

namespace {

struct SoftwareEvent {
  std::string_view name;   // libpfm4's name after "perf::", as PAPI spells it
  std::string_view alias;  // libpfm4's other name for it
  uint64_t config;
  bool in_kernel = false;  // happens in kernel mode: excluding the kernel would count nothing
};

constexpr SoftwareEvent kSoftwareEvents[] = {
    {"CPU-CLOCK", "PERF_COUNT_SW_CPU_CLOCK", PERF_COUNT_SW_CPU_CLOCK},
    {"TASK-CLOCK", "PERF_COUNT_SW_TASK_CLOCK", PERF_COUNT_SW_TASK_CLOCK},
    {"PAGE-FAULTS", "PERF_COUNT_SW_PAGE_FAULTS", PERF_COUNT_SW_PAGE_FAULTS},
    {"CONTEXT-SWITCHES", "PERF_COUNT_SW_CONTEXT_SWITCHES", PERF_COUNT_SW_CONTEXT_SWITCHES, true},
    {"CPU-MIGRATIONS", "PERF_COUNT_SW_CPU_MIGRATIONS", PERF_COUNT_SW_CPU_MIGRATIONS, true},
    {"MINOR-FAULTS", "PERF_COUNT_SW_PAGE_FAULTS_MIN", PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"MAJOR-FAULTS", "PERF_COUNT_SW_PAGE_FAULTS_MAJ", PERF_COUNT_SW_PAGE_FAULTS_MAJ},
};

// This thread's descriptors, one per event: start_thread, read and stop_thread all run on the
// thread itself. libsonde is preloaded, so its TLS is static: one instruction to reach.
thread_local int t_fds[kMaxCounters] __attribute__((tls_model("initial-exec"))) = {-1, -1, -1, -1};

bool same(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

const SoftwareEvent* find_event(std::string_view name) {
  constexpr std::string_view kPrefix = "perf::";
  if (name.size() <= kPrefix.size() || !same(name.substr(0, kPrefix.size()), kPrefix)) {
    return nullptr;
  }
  name.remove_prefix(kPrefix.size());
  for (const SoftwareEvent& e : kSoftwareEvents) {
    if (same(name, e.name) || same(name, e.alias)) return &e;
  }
  return nullptr;
}

int open_event(const SoftwareEvent& e) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = e.config;
  // User mode only, PAPI's default domain, so that both backends count alike; but a context
  // switch or a migration happens in the kernel and would then never be counted. The kernel
  // may refuse that to an unprivileged user (perf_event_paranoid 2): user mode after all.
  attr.exclude_hv = 1;
  attr.exclude_kernel = e.in_kernel ? 0 : 1;
  int fd = int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0 && e.in_kernel && (errno == EACCES || errno == EPERM)) {
    attr.exclude_kernel = 1;
    fd = int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  }
  return fd;
}

class PerfSoftwareBackend final : public CounterBackend {
 public:
  PerfSoftwareBackend(std::vector<std::string> events, std::vector<const SoftwareEvent*> kinds)
      : events_(std::move(events)), kinds_(std::move(kinds)) {}

  const char* name() const override { return "perf_event"; }
  const std::vector<std::string>& events() const override { return events_; }

  // One descriptor per event, counting the calling thread. Not a group: read through a group
  // leader, the task clock came back unchanged across a short region on an idle machine (6
  // times in 60); read on its own it is brought up to date.
  int start_thread() override {
    for (size_t i = 0; i < kinds_.size(); ++i) {
      t_fds[i] = open_event(*kinds_[i]);
      if (t_fds[i] < 0) {
        while (i > 0) close(t_fds[--i]);
        return -1;
      }
    }
    return t_fds[0];
  }

  void stop_thread(int handle) override {
    if (handle < 0 || handle != t_fds[0]) return;
    for (size_t i = 0; i < kinds_.size(); ++i) close(t_fds[i]);
    t_fds[0] = -1;
  }

  bool read(int handle, uint64_t* values) override {
    if (handle < 0) return false;
    for (size_t i = 0; i < kinds_.size(); ++i) {
      if (::read(t_fds[i], &values[i], sizeof values[i]) != ssize_t(sizeof values[i])) {
        return false;
      }
    }
    return true;
  }

 private:
  std::vector<std::string> events_;
  std::vector<const SoftwareEvent*> kinds_;
};

}  // namespace

std::unique_ptr<CounterBackend> make_perf_software_backend(const std::vector<std::string>& names,
                                                           const std::string& papi_reason,
                                                           const NoteSink& note) {
  std::vector<std::string> events;
  std::vector<const SoftwareEvent*> kinds;
  for (const std::string& name : names) {
    const SoftwareEvent* e = find_event(name);
    if (e == nullptr) {
      note("counters", fmt::format("SONDE_COUNTERS: {} is not available here (PAPI's perf_event "
                                   "component is disabled: {}); it is skipped",
                                   name, papi_reason));
      continue;
    }
    if (counters_full(events.size(), name, note)) continue;
    events.push_back(name);
    kinds.push_back(e);
  }
  if (events.empty()) return nullptr;
  // One trial group on this thread: the kernel may refuse (perf_event_paranoid, seccomp).
  auto backend = std::make_unique<PerfSoftwareBackend>(events, kinds);
  int trial = backend->start_thread();
  if (trial < 0) {
    note("counters", fmt::format("SONDE_COUNTERS: perf_event_open refused the software events "
                                 "({}); no counters are recorded",
                                 std::strerror(errno)));
    return nullptr;
  }
  backend->stop_thread(trial);
  note("counters-backend",
       fmt::format("SONDE_COUNTERS: PAPI's perf_event component is disabled ({}); the kernel's "
                   "software events are read with perf_event_open instead",
                   papi_reason));
  return backend;
}

}  // namespace sonde
