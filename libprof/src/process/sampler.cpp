#include "process/sampler.hpp"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <link.h>
#if SONDE_HAVE_UNWIND
#include <libunwind.h>
#endif
#include <fcntl.h>
#include <linux/perf_event.h>
#include <setjmp.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>

#include "core/clock.hpp"
#include "core/thread_local_state.hpp"
#include "process/signals.hpp"
#include "runtime/log.hpp"

namespace sonde {

namespace {

// A real-time signal: queued rather than merged, and apart from the SIGPROF and SIGALRM that
// hosts (and other profilers) use. Near the top of the range, which hosts take from the bottom.
int g_signal = 0;
constexpr int kSampleMark = 0x50d3;  // si_value of the sampler's timers, told from a host's
uint32_t g_hz = 0;
bool g_perf = false;       // perf_event CPU clocks, not POSIX timers (open_cpu_clock)
rlim_t g_fd_budget = 512;  // descriptors below which a thread's clock may be a perf_event
std::atomic<bool> g_on{false};
// libsonde's own text: the frames from here outwards (its wrappers, the handler) are not
// native frames of the host below the shadow stack's node.
uintptr_t g_self_lo = 0, g_self_hi = 0;
// The Python interpreter's text (the python3 executable, or libpython): under a node of the
// shadow stack, its frames are the evaluation of that node's own frame and of the Python
// frames outside it, which the shadow stack already holds; the frames worth showing are the
// extension modules' inside it (numpy's, torch's at::native), between the node and its kernel.
uintptr_t g_python_lo = 0, g_python_hi = 0;

uint32_t ring_capacity(uint32_t hz) {
  // The flusher drains the rings every second; twice that many samples of a busy thread fit.
  uint64_t c = uint64_t(hz) * 2;
  return uint32_t(c < 256 ? 256 : c > 65536 ? 65536 : c);
}

#if SONDE_HAVE_UNWIND
// libunwind is opened, RTLD_LOCAL, only when sampling is on: linked into a preloaded library,
// its _Unwind_* functions would take the host's C++ exceptions from libgcc_s.
#define SONDE_UNW_STR2(x) #x
#define SONDE_UNW_STR(x) SONDE_UNW_STR2(x)
#define SONDE_UNW_NAME(fn) SONDE_UNW_STR(UNW_OBJ(fn))
struct Unwind {
  decltype(&unw_init_local2) init_local2;
  decltype(&unw_get_reg) get_reg;
  decltype(&unw_step) step;
  decltype(&unw_set_caching_policy) set_caching_policy;
  unw_addr_space_t* local;
};
Unwind g_unw{};

bool open_libunwind() {
  void* h = dlopen(SONDE_UNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  auto get = [h](const char* name) { return dlsym(h, name); };
  g_unw.init_local2 =
      reinterpret_cast<decltype(g_unw.init_local2)>(get(SONDE_UNW_NAME(init_local2)));
  g_unw.get_reg = reinterpret_cast<decltype(g_unw.get_reg)>(get(SONDE_UNW_NAME(get_reg)));
  g_unw.step = reinterpret_cast<decltype(g_unw.step)>(get(SONDE_UNW_NAME(step)));
  g_unw.set_caching_policy =
      reinterpret_cast<decltype(g_unw.set_caching_policy)>(get(SONDE_UNW_NAME(set_caching_policy)));
  g_unw.local = static_cast<unw_addr_space_t*>(get(SONDE_UNW_NAME(local_addr_space)));
  return g_unw.init_local2 && g_unw.get_reg && g_unw.step && g_unw.set_caching_policy &&
         g_unw.local;
}
#endif

// Set while this thread unwinds in the sampler's handler.
thread_local sigjmp_buf* t_escape __attribute__((tls_model("initial-exec"))) = nullptr;
std::atomic<uint64_t> g_faults{0};

// Threads armed by sampler_arm_other: no thread-local of theirs can be set from another
// thread, so their handler finds its state here by its tid. Entries are only added (until a
// fork child forgets them); adoption clears one.
constexpr int kOthersMax = 512;
struct Other {
  std::atomic<pid_t> tid{0};
  std::atomic<ThreadState*> state{nullptr};
};
Other g_others[kOthersMax];
std::atomic<int> g_others_n{0};
thread_local ThreadState* t_other __attribute__((tls_model("initial-exec"))) = nullptr;

// Async-signal-safe: gettid and a scan of at most kOthersMax entries, once per thread. Not
// inlined: its locals would sit in the signal handler's frame across its sigsetjmp.
__attribute__((noinline)) ThreadState* other_state() {
  if (ThreadState* t = t_other) return t;
  auto tid = pid_t(syscall(SYS_gettid));
  int n = g_others_n.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kOthersMax; ++i) {
    if (g_others[i].tid.load(std::memory_order_acquire) == tid) {
      t_other = g_others[i].state.load(std::memory_order_acquire);
      return t_other;
    }
  }
  return nullptr;
}

// The kernel's CPU-time clock of another thread of this process (MAKE_THREAD_CPUCLOCK with
// CPUCLOCK_SCHED in linux/posix-timers.h; pthread_getcpuclockid needs its pthread_t).
clockid_t thread_cpu_clock(pid_t tid) { return clockid_t((~unsigned(tid) << 3) | 4 | 2); }

// The thread's CPU clock as a perf_event (what `perf record -e cpu-clock` counts), user time
// only, its overflow a signal to that thread. Preferred to a POSIX CPU timer: the kernel checks
// those only at its tick (250 Hz here), so a sample lands wherever the thread is at a tick and
// stands for all the CPU time since the last one; a thread that ran in short bursts between
// ticks had that time charged to the code it ran at the next tick (mlp_train: Adam::update
// 30 % of samples against perf's 12 %). The hrtimer behind cpu-clock fires at the period.
// -1 where perf_event_open is refused (perf_event_paranoid 3, seccomp): POSIX timers then.
int open_cpu_clock(pid_t tid) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.sample_period = 1000000000ULL / g_hz;
  // User time only: the overflow then never comes inside a system call (no EINTR), and
  // perf_event_paranoid 2 allows it.
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.disabled = 1;
  a.wakeup_events = 1;
  int fd = int(syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return -1;
  // A descriptor per thread: past half the host's limit, threads get POSIX timers instead, so
  // a program with thousands of threads never finds its own open() failing with EMFILE.
  if (rlim_t(fd) >= g_fd_budget) {
    close(fd);
    return -1;
  }
  f_owner_ex owner{F_OWNER_TID, tid};
  // One overflow, then the event disables itself until the handler refreshes it: never more
  // than one signal pending, so the kernel never finds the real-time queue full and falls back
  // to a plain SIGIO (whose default action ends the host).
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, g_signal) != 0 ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0 ||
      ioctl(fd, PERF_EVENT_IOC_REFRESH, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool arm_timer(ThreadState& t, clockid_t clock, pid_t tid) {
  if (!t.samples) t.samples = std::make_unique<ThreadSamples>(ring_capacity(g_hz));
  int fd = g_perf ? open_cpu_clock(tid) : -1;
  if (fd >= 0) {
    t.samples->perf_fd = fd;
    t.samples->armed = true;
    return true;
  }
  sigevent ev{};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = g_signal;
  ev.sigev_value.sival_int = kSampleMark;
  ev._sigev_un._tid = tid;  // sigev_notify_thread_id: glibc 2.35+ only
  if (timer_create(clock, &ev, &t.samples->timer) != 0) return false;
  long period = 1000000000L / long(g_hz);
  itimerspec spec{};
  spec.it_interval.tv_sec = period / 1000000000L;
  spec.it_interval.tv_nsec = period % 1000000000L;
  spec.it_value = spec.it_interval;
  timer_settime(t.samples->timer, 0, &spec, nullptr);
  t.samples->armed = true;
  return true;
}

// Re-enables the thread's event for one more period, at the end of the handler (whose own
// time is then not counted), however the handler ends.
struct Refresh {
  int fd;
  ~Refresh() {
    if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_REFRESH, 1);
  }
};

bool in_sonde(uintptr_t ip) { return ip >= g_self_lo && ip < g_self_hi; }

struct TextRange {
  uintptr_t address;
  uintptr_t lo = 0, hi = 0;
};

int find_text(dl_phdr_info* info, size_t, void* arg) {
  auto* range = static_cast<TextRange*>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (range->address < lo || range->address >= lo + ph.p_memsz) continue;
    range->lo = lo;
    range->hi = lo + ph.p_memsz;
    return 1;
  }
  return 0;
}

// The executable segment that holds `address`; {0, 0} when none does.
TextRange text_of(const void* address) {
  TextRange range{reinterpret_cast<uintptr_t>(address)};
  if (address != nullptr) dl_iterate_phdr(find_text, &range);
  return range;
}

void find_own_text() {
  TextRange self = text_of(reinterpret_cast<void*>(&sampler_on_signal));
  g_self_lo = self.lo;
  g_self_hi = self.hi;
  TextRange python = text_of(dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault"));
  g_python_lo = python.lo;
  g_python_hi = python.hi;
}

bool in_python(uintptr_t ip) { return ip >= g_python_lo && ip < g_python_hi; }

// Whether the walk goes on to record `ip`: not past the stack's end, sonde's own frames, or,
// under a node of the shadow stack, the interpreter's (at the thread's root they are all
// there is to see, and kept).
bool keep_frame(const Sample* s, uintptr_t ip) {
  return ip != 0 && !in_sonde(ip) && !(s->node != 0 && in_python(ip));
}

#if defined(__x86_64__)
// The ucontext's register of each DWARF register number (x86-64 psABI order).
constexpr int kGregOfDwarf[kCfiRegs] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                        REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                        REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
#endif

// Objects unloaded so far (glibc's dlpi_subs), read at each drain: a thread's cache of frame
// rules is emptied when it changes, since a new object may now hold an old one's addresses.
std::atomic<uint64_t> g_unloads{0};
std::atomic<uint64_t> g_handovers{0};  // samples whose walk libunwind finished

#if SONDE_HAVE_UNWIND && defined(__x86_64__)
// The frames past the one in `regs` (already recorded as the n-th), by libunwind: its state is
// a ucontext holding the registers the CFI walk had reached.
uint32_t unwind_rest(const ucontext_t& interrupted, const CfiRegs& regs, bool exact, Sample* s,
                     uint32_t n) {
  ucontext_t uc = interrupted;
  for (int r = 0; r < kCfiRegs; ++r) {
    if ((regs.known >> r) & 1) uc.uc_mcontext.gregs[kGregOfDwarf[r]] = greg_t(regs.r[r]);
  }
  unw_cursor_t cursor;
  if (g_unw.init_local2(&cursor, reinterpret_cast<unw_context_t*>(&uc),
                        exact ? UNW_INIT_SIGNAL_FRAME : 0) < 0) {
    return n;
  }
  while (n < kSampleFrames && g_unw.step(&cursor) > 0) {
    unw_word_t ip = 0;
    if (g_unw.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || !keep_frame(s, ip)) break;
    s->pc[n++] = ip;
  }
  return n;
}
#endif

}  // namespace

bool sampler_init(uint32_t hz) {
  if (hz == 0) return false;
#if SONDE_HAVE_UNWIND
  if (!open_libunwind()) {
    warn("SONDE_SAMPLE_HZ: {} cannot be opened ({}); the run is not sampled", SONDE_UNWIND_SONAME,
         dlerror() ? "missing symbols" : "not found");
    return false;
  }
  g_signal = SIGRTMAX - 5;
  reinstall_signal_handler(g_signal);  // its mask lets the unwinder's faults through
  g_hz = hz;
  g_perf = true;  // for the probe below
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    g_fd_budget = files.rlim_cur == RLIM_INFINITY ? rlim_t(1) << 20 : files.rlim_cur / 2;
  }
  find_own_text();
  g_unw.set_caching_policy(*g_unw.local, UNW_CACHE_PER_THREAD);
  // libunwind sets itself up at its first use: that happens here, not in a signal handler.
  ucontext_t ctx;  // libunwind's local context is the ucontext on Linux
  unw_cursor_t cursor;
  if (getcontext(&ctx) == 0 &&
      g_unw.init_local2(&cursor, reinterpret_cast<unw_context_t*>(&ctx), 0) == 0) {
    g_unw.step(&cursor);
  }
  int probe = open_cpu_clock(pid_t(syscall(SYS_gettid)));
  if (probe >= 0) {
    g_perf = true;
    close(probe);
  }
  g_on.store(true, std::memory_order_release);
  return true;
#else
  warn("SONDE_SAMPLE_HZ: sonde was built without libunwind; the run is not sampled");
  return false;
#endif
}

bool sampler_on() { return g_on.load(std::memory_order_acquire); }
int sampler_signal() { return g_signal; }

void sampler_arm(ThreadState& t) {
  if (!sampler_on() || (t.samples && t.samples->armed)) return;
  // CPU time, not wall time: a thread blocked in a system call consumes none, so the signal
  // never interrupts one (no EINTR), and idle threads are not sampled.
  if (!arm_timer(t, CLOCK_THREAD_CPUTIME_ID, pid_t(syscall(SYS_gettid)))) {
    warn("SONDE_SAMPLE_HZ: timer_create failed ({}); thread {} is not sampled", errno, t.seq());
  }
}

bool sampler_arm_other(ThreadState& t) {
  if (!sampler_on()) return false;
  int i = g_others_n.load(std::memory_order_relaxed);
  if (i >= kOthersMax) return false;
  // Published before the timer exists, so its first signal finds the state.
  g_others[i].state.store(&t, std::memory_order_relaxed);
  g_others[i].tid.store(t.tid(), std::memory_order_release);
  g_others_n.store(i + 1, std::memory_order_release);
  if (arm_timer(t, thread_cpu_clock(t.tid()), t.tid())) return true;
  g_others[i].tid.store(0, std::memory_order_release);
  g_others_n.store(i, std::memory_order_release);
  return false;
}

ThreadState* sampler_adopt(pid_t tid) {
  int n = g_others_n.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kOthersMax; ++i) {
    if (g_others[i].tid.load(std::memory_order_acquire) != tid) continue;
    ThreadState* t = g_others[i].state.load(std::memory_order_acquire);
    g_others[i].tid.store(0, std::memory_order_release);  // t_state finds it from now on
    return t;
  }
  return nullptr;
}

void sampler_forget_others(const std::vector<ThreadState*>& others) {
  for (Other& o : g_others) o.tid.store(0, std::memory_order_relaxed);
  g_others_n.store(0, std::memory_order_release);
  t_other = nullptr;
  for (ThreadState* t : others) {
    if (t != t_state && t->samples && t->samples->perf_fd >= 0) close(t->samples->perf_fd);
  }
}

void sampler_fork_child(ThreadState& t) {
  if (!t.samples) return;
  // The descriptor is a copy of the parent's, whose event counts the parent's thread.
  if (t.samples->perf_fd >= 0) close(t.samples->perf_fd);
  t.samples->perf_fd = -1;
  t.samples->armed = false;
  t.samples->ring.clear();
  t.samples->counts.clear();
  sampler_arm(t);
}

void sampler_disarm(ThreadState& t) {
  if (!t.samples || !t.samples->armed) return;
  // A signal already queued is delivered as this call returns (it is not blocked), to the
  // handler: none is left pending for an exec'd image, where it would kill at the default.
  if (t.samples->perf_fd >= 0) {
    ioctl(t.samples->perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    close(t.samples->perf_fd);  // perf_fd kept: see ThreadSamples
  } else {
    timer_delete(t.samples->timer);
  }
  t.samples->armed = false;
}

void sampler_drain(ThreadState& t) {
  if (!t.samples) return;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        g_unloads.store(info->dlpi_subs, std::memory_order_relaxed);
        return 1;  // the count is the same in every entry
      },
      nullptr);
  t.samples->ring.drain([&](const Sample& s) {
    std::vector<uintptr_t> frames(s.pc, s.pc + s.frames);
    t.samples->counts[{s.node, std::move(frames)}] += s.weight;
  });
}

bool sampler_owns(int sig, const siginfo_t* info) {
  if (sig != g_signal || g_signal == 0 || info == nullptr) return false;
  if (info->si_code == SI_TIMER) return info->si_value.sival_int == kSampleMark;
  if (info->si_code != POLL_IN && info->si_code != POLL_HUP) return false;
  // A perf_event's signal: this thread's own event's descriptor.
  ThreadState* t = t_state;
  if (t == nullptr) t = other_state();
  return t != nullptr && t->samples && t->samples->perf_fd == info->si_fd;
}

// Async-signal-safe: the thread's own ring and rule cache, no lock, no malloc, no system call but
// the refresh (libunwind, for a frame the CFI walk cannot follow, takes its own locks).
void sampler_on_signal(const siginfo_t* info, void* context) {
#if SONDE_HAVE_UNWIND
  // Set once, before the sigsetjmp below: nothing for a jump back to clobber.
  ThreadState* const t = t_state != nullptr ? t_state : other_state();
  // Read, not cleared: the owner may be inside its own update of `suppress`.
  if (t == nullptr || !t->samples || context == nullptr) return;
  Refresh refresh{t->samples->armed && info->si_code != SI_TIMER ? info->si_fd : -1};
  // A closed collection window takes no sample, but a perf event fires once per refresh: the
  // return above this one skipped it, and the thread's first signal before the window opened
  // was its last (--delay or --steps with --sample: 0 samples in the whole run).
  if ((t->suppress & ThreadState::kWindowClosed) != 0 && t->window->closed()) return;
  uint64_t start = now_ticks();
  Sample* s = t->samples->ring.reserve();
  if (s == nullptr) return;
  // A perf_event signal is one period (si_overrun is no field of its siginfo).
  s->weight =
      info->si_code != SI_TIMER || info->si_overrun <= 0 ? 1 : 1 + uint32_t(info->si_overrun);
  uint32_t d = t->depth();
  s->node = d <= t->stack_.room() ? t->stack_[d].node.load(std::memory_order_relaxed) : 0;
  // The unwinder reads the stack and unwind tables: a frame it misreads must cost the sample,
  // never the host. Faults are let through to sonde's handler, which jumps back here.
  // The mask is not saved (a system call): the handler's return restores the host's anyway.
  sigjmp_buf escape;
  if (sigsetjmp(escape, 0) != 0) {
    t_escape = nullptr;
    g_faults.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  t_escape = &escape;  // SIGSEGV and SIGBUS are out of this handler's mask (kernel_action)
#if defined(__x86_64__)
  // sonde's own walk of the CFI, with its per-thread cache; libunwind only from a frame whose
  // CFI it cannot follow.
  const auto& gregs = static_cast<const ucontext_t*>(context)->uc_mcontext.gregs;
  CfiRegs regs;
  for (int r = 0; r < kCfiRegs; ++r) regs.r[r] = uint64_t(gregs[kGregOfDwarf[r]]);
  regs.known = (1u << kCfiRegs) - 1;
  uint64_t unloads = g_unloads.load(std::memory_order_relaxed);
  if (t->samples->unwind.generation != unloads) t->samples->unwind.clear(unloads);
  bool exact = true;  // the interrupted instruction itself, not a return address
  uint32_t n = 0;
  CfiStep step = CfiStep::kEnd;
  while (keep_frame(s, regs.r[kCfiRip])) {
    // Return addresses point past their call; the innermost frame is the interrupted
    // instruction itself (symbolize steps one byte back from every address).
    s->pc[n] = n == 0 ? regs.r[kCfiRip] + 1 : regs.r[kCfiRip];
    if (++n == kSampleFrames) break;
    step = cfi_step(t->samples->unwind, regs, exact);
    if (step != CfiStep::kStepped) break;
  }
  if (step == CfiStep::kUnsupported) {
    g_handovers.fetch_add(1, std::memory_order_relaxed);
    n = unwind_rest(*static_cast<const ucontext_t*>(context), regs, exact, s, n);
  }
#else
  // Elsewhere (aarch64) libunwind walks the whole stack from the kernel's ucontext.
  unw_cursor_t cursor;
  uint32_t n = 0;
  auto* uc = static_cast<unw_context_t*>(context);
  if (g_unw.init_local2(&cursor, uc, UNW_INIT_SIGNAL_FRAME) == 0) {
    do {
      unw_word_t ip = 0;
      if (g_unw.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || !keep_frame(s, ip)) break;
      s->pc[n] = n == 0 ? ip + 1 : ip;
      ++n;
    } while (n < kSampleFrames && g_unw.step(&cursor) > 0);
  }
#endif
  t_escape = nullptr;
  s->frames = n;
  t->samples->ring.commit();
  CfiCache::bump(t->samples->handled);
  t->samples->handler_ticks.store(
      t->samples->handler_ticks.load(std::memory_order_relaxed) + (now_ticks() - start),
      std::memory_order_relaxed);
#else
  (void)info;
  (void)context;
#endif
}

bool sampler_escape_fault() {
  sigjmp_buf* escape = t_escape;
  if (escape == nullptr) return false;
  siglongjmp(*escape, 1);
}

uint64_t sampler_faults() { return g_faults.load(std::memory_order_relaxed); }

void sampler_log_unwinding(const std::vector<ThreadState*>& threads, double ns_per_tick) {
  uint64_t hits = 0, misses = 0, ticks = 0, handled = 0;
  for (const ThreadState* t : threads) {
    if (!t->samples) continue;
    hits += t->samples->unwind.hits.load(std::memory_order_relaxed);
    misses += t->samples->unwind.misses.load(std::memory_order_relaxed);
    ticks += t->samples->handler_ticks.load(std::memory_order_relaxed);
    handled += t->samples->handled.load(std::memory_order_relaxed);
  }
  double us = handled == 0 ? 0.0 : double(ticks) * ns_per_tick / 1e3 / double(handled);
  log(LogLevel::kDebug,
      "sampler: {} samples, {:.1f} us each in the handler (mean, before the perf_event refresh)",
      handled, us);
  log(LogLevel::kDebug,
      "sampler: {} frames stepped, {} of their rules read from the unwind tables "
      "(cache misses); {} samples finished by libunwind",
      hits + misses, misses, g_handovers.load(std::memory_order_relaxed));
}

}  // namespace sonde
