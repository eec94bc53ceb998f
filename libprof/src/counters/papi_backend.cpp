#include <papi.h>
#include <pthread.h>

#include <fmt/format.h>

#include "counters/counter_backend.hpp"

namespace sonde {

namespace {

unsigned long thread_id() { return static_cast<unsigned long>(pthread_self()); }

class PapiBackend final : public CounterBackend {
 public:
  PapiBackend(std::vector<std::string> events, std::vector<int> codes, bool multiplex)
      : events_(std::move(events)), codes_(std::move(codes)), multiplex_(multiplex) {}

  const char* name() const override { return "papi"; }
  const std::vector<std::string>& events() const override { return events_; }

  int start_thread() override {
    int set = PAPI_NULL;
    if (PAPI_create_eventset(&set) != PAPI_OK) return -1;
    if (multiplex_ && (PAPI_assign_eventset_component(set, 0) != PAPI_OK ||
                       PAPI_set_multiplex(set) != PAPI_OK)) {
      return -1;
    }
    for (int code : codes_) {
      if (PAPI_add_event(set, code) != PAPI_OK) return -1;
    }
    return PAPI_start(set) == PAPI_OK ? set : -1;
  }

  void stop_thread(int handle) override {
    long long ignored[kMaxCounters];
    PAPI_stop(handle, ignored);
    PAPI_cleanup_eventset(handle);
    PAPI_destroy_eventset(&handle);
    PAPI_unregister_thread();
  }

  bool read(int handle, uint64_t* values) override {
    long long raw[kMaxCounters];
    if (PAPI_read(handle, raw) != PAPI_OK) return false;
    for (size_t i = 0; i < codes_.size(); ++i) values[i] = uint64_t(raw[i]);
    return true;
  }

 private:
  std::vector<std::string> events_;
  std::vector<int> codes_;
  bool multiplex_;
};

}  // namespace

bool counters_full(size_t counted, const std::string& name, const NoteSink& note) {
  if (counted < kMaxCounters) return false;
  note("counters", fmt::format("SONDE_COUNTERS: at most {} events are counted; {} is skipped",
                               kMaxCounters, name));
  return true;
}

std::unique_ptr<CounterBackend> make_papi_backend(const std::vector<std::string>& names,
                                                  const NoteSink& note) {
  if (names.empty()) return nullptr;
  int version = PAPI_library_init(PAPI_VER_CURRENT);
  if (version != PAPI_VER_CURRENT) {
    note("counters", fmt::format("SONDE_COUNTERS: PAPI could not start ({}); no counters are "
                                 "recorded", version > 0 ? "version mismatch" : PAPI_strerror(version)));
    return nullptr;
  }
  if (int rc = PAPI_thread_init(thread_id); rc != PAPI_OK) {
    note("counters", fmt::format("SONDE_COUNTERS: PAPI_thread_init failed ({}); no counters are "
                                 "recorded", PAPI_strerror(rc)));
    return nullptr;
  }
  // Without its perf_event component PAPI counts nothing on the CPU, the kernel's software
  // events included; those can still be read directly.
  int perf = PAPI_get_component_index("perf_event");
  const PAPI_component_info_t* component = perf >= 0 ? PAPI_get_component_info(perf) : nullptr;
  if (component != nullptr && component->disabled != 0) {
    return make_perf_software_backend(names, component->disabled_reason, note);
  }
  // Which events can really be counted here (a preset may have a name and no counter behind
  // it), and whether they fit the counters together (else they are multiplexed).
  std::vector<std::string> events;
  std::vector<int> codes;
  bool multiplex = false;
  int trial = PAPI_NULL;
  PAPI_create_eventset(&trial);
  for (const std::string& name : names) {
    int code = 0;
    int rc = PAPI_event_name_to_code(name.c_str(), &code);
    if (rc == PAPI_OK) rc = PAPI_add_event(trial, code);
    if (rc == PAPI_ECNFLCT) {
      multiplex = true;
      rc = PAPI_OK;
    }
    if (rc != PAPI_OK) {
      note("counters", fmt::format("SONDE_COUNTERS: {} is not available here ({}); it is skipped",
                                   name, PAPI_strerror(rc)));
      continue;
    }
    if (counters_full(events.size(), name, note)) continue;
    events.push_back(name);
    codes.push_back(code);
  }
  PAPI_cleanup_eventset(trial);
  PAPI_destroy_eventset(&trial);
  if (events.empty()) return nullptr;
  if (multiplex && PAPI_multiplex_init() != PAPI_OK) {
    note("counters", "SONDE_COUNTERS: the events do not fit the counters together and PAPI "
                     "cannot multiplex them here; no counters are recorded");
    return nullptr;
  }
  return std::make_unique<PapiBackend>(std::move(events), std::move(codes), multiplex);
}

}  // namespace sonde
