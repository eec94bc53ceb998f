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
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "counter_backend.hpp"

namespace sonde {

namespace {

struct SoftwareEvent {
  std::string_view name;   // libpfm4's name after "perf::", as PAPI spells it
  std::string_view alias;  // libpfm4's other name for it
  uint64_t config;
};

constexpr SoftwareEvent kSoftwareEvents[] = {
    {"CPU-CLOCK", "PERF_COUNT_SW_CPU_CLOCK", PERF_COUNT_SW_CPU_CLOCK},
    {"TASK-CLOCK", "PERF_COUNT_SW_TASK_CLOCK", PERF_COUNT_SW_TASK_CLOCK},
    {"PAGE-FAULTS", "PERF_COUNT_SW_PAGE_FAULTS", PERF_COUNT_SW_PAGE_FAULTS},
    {"CONTEXT-SWITCHES", "PERF_COUNT_SW_CONTEXT_SWITCHES", PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"CPU-MIGRATIONS", "PERF_COUNT_SW_CPU_MIGRATIONS", PERF_COUNT_SW_CPU_MIGRATIONS},
    {"MINOR-FAULTS", "PERF_COUNT_SW_PAGE_FAULTS_MIN", PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"MAJOR-FAULTS", "PERF_COUNT_SW_PAGE_FAULTS_MAJ", PERF_COUNT_SW_PAGE_FAULTS_MAJ},
};

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

int open_event(uint64_t config, int group) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = config;
  attr.read_format = PERF_FORMAT_GROUP;
  attr.exclude_kernel = 1;  // PAPI's default domain (user), so both backends count alike
  attr.exclude_hv = 1;
  return int(syscall(SYS_perf_event_open, &attr, 0, -1, group, PERF_FLAG_FD_CLOEXEC));
}

class PerfSoftwareBackend final : public CounterBackend {
 public:
  PerfSoftwareBackend(std::vector<std::string> events, std::vector<uint64_t> configs)
      : events_(std::move(events)), configs_(std::move(configs)) {}

  const char* name() const override { return "perf_event"; }
  const std::vector<std::string>& events() const override { return events_; }

  // One group per thread, counting that thread; the leader's descriptor is the handle.
  int start_thread() override {
    std::vector<int> fds;
    for (uint64_t config : configs_) {
      int fd = open_event(config, fds.empty() ? -1 : fds.front());
      if (fd < 0) {
        for (int f : fds) close(f);
        return -1;
      }
      fds.push_back(fd);
    }
    std::lock_guard lock(mu_);
    groups_[fds.front()] = fds;
    return fds.front();
  }

  void stop_thread(int handle) override {
    std::lock_guard lock(mu_);
    auto it = groups_.find(handle);
    if (it == groups_.end()) return;
    for (int fd : it->second) close(fd);
    groups_.erase(it);
  }

  bool read(int handle, uint64_t* values) override {
    uint64_t buf[1 + kMaxCounters];
    ssize_t want = ssize_t(sizeof(uint64_t) * (1 + configs_.size()));
    if (::read(handle, buf, size_t(want)) != want || buf[0] != configs_.size()) return false;
    for (size_t i = 0; i < configs_.size(); ++i) values[i] = buf[1 + i];
    return true;
  }

 private:
  std::vector<std::string> events_;
  std::vector<uint64_t> configs_;
  std::mutex mu_;  // thread start and end only
  std::unordered_map<int, std::vector<int>> groups_;
};

}  // namespace

std::unique_ptr<CounterBackend> make_perf_software_backend(const std::vector<std::string>& names,
                                                           const std::string& papi_reason,
                                                           const NoteSink& note) {
  std::vector<std::string> events;
  std::vector<uint64_t> configs;
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
    configs.push_back(e->config);
  }
  if (events.empty()) return nullptr;
  // One trial group on this thread: the kernel may refuse (perf_event_paranoid, seccomp).
  auto backend = std::make_unique<PerfSoftwareBackend>(events, configs);
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
