#include <dlfcn.h>
#include <fmt/format.h>
#include <papi.h>
#include <pthread.h>

#include "counters/counter_backend.hpp"

namespace sonde {

namespace {

unsigned long thread_id() { return static_cast<unsigned long>(pthread_self()); }

// libpapi is opened when SONDE_COUNTERS asks for it, not linked: it brings libpfm, whose
// 41,000 relocations made every profiled process start about 8 ms later on the VM of
// docs/performance.md, counters or not. Set once, before any thread reads them.
struct Papi {
// clang-format off (one function a line; clang-format 14 reflows X-lists differently each run)
#define SONDE_PAPI_FUNCTIONS(X) \
  X(library_init)               \
  X(thread_init)                \
  X(get_component_index)        \
  X(get_component_info)         \
  X(create_eventset)            \
  X(assign_eventset_component)  \
  X(set_multiplex)              \
  X(add_event)                  \
  X(start)                      \
  X(stop)                       \
  X(read)                       \
  X(cleanup_eventset)           \
  X(destroy_eventset)           \
  X(unregister_thread)          \
  X(event_name_to_code)         \
  X(multiplex_init)             \
  X(strerror)
// clang-format on
#define SONDE_PAPI_POINTER(fn) decltype(&PAPI_##fn) fn = nullptr;
  SONDE_PAPI_FUNCTIONS(SONDE_PAPI_POINTER)
#undef SONDE_PAPI_POINTER
};
Papi g_papi;

// An empty string, or why PAPI cannot be used.
std::string open_papi() {
  void* h = dlopen(SONDE_PAPI_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return fmt::format("{} cannot be opened: {}", SONDE_PAPI_SONAME, why ? why : "unknown error");
  }
  std::string missing;
#define SONDE_PAPI_LOAD(fn)                                                 \
  g_papi.fn = reinterpret_cast<decltype(g_papi.fn)>(dlsym(h, "PAPI_" #fn)); \
  if (g_papi.fn == nullptr && missing.empty()) missing = "PAPI_" #fn;
  SONDE_PAPI_FUNCTIONS(SONDE_PAPI_LOAD)
#undef SONDE_PAPI_LOAD
  return missing.empty() ? std::string() : fmt::format("{} lacks {}", SONDE_PAPI_SONAME, missing);
}

class PapiBackend final : public CounterBackend {
 public:
  PapiBackend(std::vector<std::string> events, std::vector<int> codes, bool multiplex)
      : events_(std::move(events)), codes_(std::move(codes)), multiplex_(multiplex) {}

  const char* name() const override { return "papi"; }
  const std::vector<std::string>& events() const override { return events_; }

  int start_thread() override {
    int set = PAPI_NULL;
    if (g_papi.create_eventset(&set) != PAPI_OK) return -1;
    if (multiplex_ && (g_papi.assign_eventset_component(set, 0) != PAPI_OK ||
                       g_papi.set_multiplex(set) != PAPI_OK)) {
      return -1;
    }
    for (int code : codes_) {
      if (g_papi.add_event(set, code) != PAPI_OK) return -1;
    }
    return g_papi.start(set) == PAPI_OK ? set : -1;
  }

  void stop_thread(int handle) override {
    long long ignored[kMaxCounters];
    g_papi.stop(handle, ignored);
    g_papi.cleanup_eventset(handle);
    g_papi.destroy_eventset(&handle);
    g_papi.unregister_thread();
  }

  bool read(int handle, uint64_t* values) override {
    long long raw[kMaxCounters];
    if (g_papi.read(handle, raw) != PAPI_OK) return false;
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
  if (std::string why = open_papi(); !why.empty()) {
    note("counters", fmt::format("SONDE_COUNTERS: {}; no counters are recorded", why));
    return nullptr;
  }
  int version = g_papi.library_init(PAPI_VER_CURRENT);
  if (version != PAPI_VER_CURRENT) {
    note("counters", fmt::format("SONDE_COUNTERS: PAPI could not start ({}); no counters are "
                                 "recorded",
                                 version > 0 ? "version mismatch" : g_papi.strerror(version)));
    return nullptr;
  }
  if (int rc = g_papi.thread_init(thread_id); rc != PAPI_OK) {
    note("counters", fmt::format("SONDE_COUNTERS: PAPI_thread_init failed ({}); no counters are "
                                 "recorded",
                                 g_papi.strerror(rc)));
    return nullptr;
  }
  // Without its perf_event component PAPI counts nothing on the CPU, the kernel's software
  // events included; those can still be read directly.
  int perf = g_papi.get_component_index("perf_event");
  const PAPI_component_info_t* component = perf >= 0 ? g_papi.get_component_info(perf) : nullptr;
  if (component != nullptr && component->disabled != 0) {
    return make_perf_software_backend(names, component->disabled_reason, note);
  }
  // Which events can really be counted here (a preset may have a name and no counter behind
  // it), and whether they fit the counters together (else they are multiplexed).
  std::vector<std::string> events;
  std::vector<int> codes;
  bool multiplex = false;
  int trial = PAPI_NULL;
  g_papi.create_eventset(&trial);
  for (const std::string& name : names) {
    int code = 0;
    int rc = g_papi.event_name_to_code(name.c_str(), &code);
    if (rc == PAPI_OK) rc = g_papi.add_event(trial, code);
    if (rc == PAPI_ECNFLCT) {
      multiplex = true;
      rc = PAPI_OK;
    }
    if (rc != PAPI_OK) {
      note("counters", fmt::format("SONDE_COUNTERS: {} is not available here ({}); it is skipped",
                                   name, g_papi.strerror(rc)));
      continue;
    }
    if (counters_full(events.size(), name, note)) continue;
    events.push_back(name);
    codes.push_back(code);
  }
  g_papi.cleanup_eventset(trial);
  g_papi.destroy_eventset(&trial);
  if (events.empty()) return nullptr;
  if (multiplex && g_papi.multiplex_init() != PAPI_OK) {
    note("counters",
         "SONDE_COUNTERS: the events do not fit the counters together and PAPI "
         "cannot multiplex them here; no counters are recorded");
    return nullptr;
  }
  return std::make_unique<PapiBackend>(std::move(events), std::move(codes), multiplex);
}

}  // namespace sonde
