// The writing side of the runtime: a flush (a snapshot of every thread, written to the store),
// the flusher thread that runs the periodic ones and the signal-requested ones, and the
// sampler's drains between flushes.
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <utility>

#include "core/cpu_quota.hpp"
#include "core/host_cpu.hpp"
#include "core/proc_file.hpp"
#include "core/signal_block.hpp"
#include "core/thread_local_state.hpp"
#include "core/window.hpp"
#include "process/run_info.hpp"
#include "process/sampler.hpp"
#include "process/signals.hpp"
#include "runtime/flush_notes.hpp"
#include "runtime/last_thread.hpp"
#include "runtime/python_presence.hpp"
#include "runtime/runtime.hpp"
#include "sonde/quiet_write.hpp"
#include "sonde/vector_isa.hpp"
#include "store/fd_guard.hpp"
#include "store/sqlite_db.hpp"
#include "symbols/loaded_objects.hpp"
#include "symbols/loader_free.hpp"

namespace sonde {

namespace {
constexpr double kOrphanPoll = 0.05;  // s
// s from start (or fork) to a process's first flush, which writes its processes row for the run
// to see while it runs. Not at start: every profiled process paid a second flush there (5 ms
// of a 40 ms Python start, most of it SQLite's first use), and the shells, launchers and
// helpers a run starts end long before this, written once.
constexpr double kFirstFlushS = 1.0;
// s: as long as a writer waits for the others of its run (store/sqlite_db.hpp), and a little more.
constexpr time_t kExitFlushWait = kWriterWaitMaxS + 5;
// s: a fork asks for a flush to write its count (child_forked), this long after it, so that the
// burst it may begin (a DataLoader's or a pool's workers) is written once; and such flushes come
// at most this often: a shell's loop forks hundreds of times a second, and a flush each cost it
// 20 % (300 forks of /bin/true: 2.6 s against 2.2 s).
constexpr double kForkBurstS = 0.02;
constexpr double kForkFlushGapS = 0.5;

double monotonic_s() { return double(monotonic_ns()) / 1e9; }

// Whether a process that intercepted nothing looks like one that should have: a library sonde
// wraps is loaded (yet no call reached it: RTLD_DEEPBIND, a static copy beside it), or it spent
// half a second of CPU (a statically linked BLAS shows no library at all). Launchers, shells,
// multiprocessing's resource tracker and forkserver, `timeout`: none of these. A fork child
// (`cpu_only`) has every library its parent loaded whether it calls them or not (a torch
// DataLoader's workers): only its CPU counts.
bool looks_numeric(bool cpu_only) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  if (cpu_s >= 0.5) return true;
  if (cpu_only || loader_free()) return false;
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const char* base = std::strrchr(info->dlpi_name, '/');
        base = base != nullptr ? base + 1 : info->dlpi_name;
        for (const char* lib :
             {"blas", "mkl_", "dnnl", "cudart", "libcuda.", "cudnn", "nccl", "libmpi"}) {
          if (std::strstr(base, lib) != nullptr && std::strstr(base, "libsonde") == nullptr) {
            *static_cast<bool*>(out) = true;
            return 1;
          }
        }
        return 0;
      },
      &found);
  return found;
}
// The OpenMP runtime loaded in the process (libgomp, Intel's libiomp5, LLVM's libomp), by its
// file's name, or "": OMP_PROC_BIND and OMP_PLACES act only through one. sonde tune's pinning
// stage was judged "faster" on noise for a numpy program with OpenBLAS's pthreads build, whose
// process no library read them in (a red-team find).
std::string openmp_runtime() { return loaded_object({"libgomp", "libiomp5", "libomp."}); }
}  // namespace

bool Runtime::flush(FlushKind kind, const char* end_reason) {
  try {
    return flush_now(kind, end_reason);
  } catch (const std::bad_alloc&) {
    // The host at its memory limit (`ulimit -v`, a cgroup's): this flush is skipped and what
    // it would have written stays for the next, while the program goes on as it would have
    // (it died of std::terminate, on the flusher thread, in a program that caught its own
    // MemoryError). Nothing that allocates here: there is nothing left to give.
    flushes_out_of_memory_.fetch_add(1, std::memory_order_relaxed);
    if (!said_out_of_memory_.exchange(true) && log_level() >= LogLevel::kWarn)
      say_on_stderr(
          "sonde: the process is out of memory: its profile is written when there is "
          "memory again, or not at all\n");
    return false;
  }
}

bool Runtime::flush_now(FlushKind kind, const char* end_reason) {
  if (!store_ok_ || filtered() || unseen_filter()) return false;
  // A host thread flushing (exit, exec, sonde_flush) must not take a SIGTERM while it holds
  // the store lock that the signal's own flush needs. The flusher blocks signals anyway, but
  // for its last flush once the host's threads are gone (end_without_host), where they were
  // unblocked so that a SIGTERM ends the process: blocked here too, a flush waiting on a
  // locked file held the SIGTERM off until SQLite gave up.
  std::optional<AsyncSignalBlock> no_signals;
  if (pid_t(syscall(SYS_gettid)) != flusher_tid_.load()) no_signals.emplace();
  std::lock_guard lock(store_mu_);
  if (finished_ || (kind == FlushKind::kPeriodic && (exiting_ || exec_flushed_))) return false;
  bool final = kind == FlushKind::kExit || kind == FlushKind::kSignal;
  uint64_t now = now_ticks();
  clock_.refresh();
  if (fork_started_ticks_ != 0 && store_.process_id() == 0)
    process_.started_ns = clock_.to_realtime_ns(fork_started_ticks_);

  FlushData d;
  d.run = &run_;
  d.process = &process_;
  // GPU records first: every call path they point to is then in the snapshots below.
  GpuBackend* gpu = this->gpu();
  if (gpu != nullptr) gpu->collect(d.gpu, final, clock_);
  SnapshotLosses losses = snapshot_threads(d, now, final);
  note_losses(losses, final, sampler_faults(), config_, trace_loss_error_,
              [this](const std::string& topic, const std::string& message, bool print,
                     const std::string& count_of) {
                if (count_of.empty())
                  add_note(topic, message, print);
                else
                  add_counted_note(topic, message, count_of, print);
              });
  note_window(final);
  note_unmeasured(d, final);
  for (LaterNote& later : later_notes_)
    if (const char* message = later.message.load(std::memory_order_acquire))
      add_note(later.topic.load(std::memory_order_relaxed), message, false);
  if (uint64_t skipped = flushes_out_of_memory_.load(); final && skipped > 0)
    add_note("memory",
             fmt::format("{} flush{} of this process could not be made for want of memory "
                         "(ulimit -v, a cgroup's limit); what {} held was written by a later one",
                         skipped, skipped == 1 ? "" : "es", skipped == 1 ? "it" : "they"),
             false);
  collect_info(d, gpu);
  d.counter_events = counter_events();
  d.peaks = peaks_;
  d.now_ns = clock_.to_realtime_ns(now);
  d.end_reason = end_reason;

  std::string error;
  // A periodic flush waiting for the other writers gives way to an _exit's or a signal's,
  // which comes next on this thread: 400 fork children ending together in their first second,
  // their periodic flushes queued for the lock, waited out their 3 s and lost 123 processes.
  store_.give_up_when(kind == FlushKind::kPeriodic ? &pending_signal_ : nullptr);
  store_.report_progress_to(&writers_progress_);
  bool written = store_.write(d, routines_, error);
  bool gave_way = !written && kind == FlushKind::kPeriodic && pending_signal_.load() != 0;
  // A periodic flush of a process holding every descriptor: the last one, written by a child,
  // says whether the profile was lost.
  gave_way = gave_way || (!written && !final && store_.waits_for_descriptors());
  if (!final) {  // the next flush copies into the same memory
    spare_rows_.resize(d.threads.size());
    for (size_t k = 0; k < d.threads.size(); ++k) spare_rows_[k] = std::move(d.threads[k].nodes);
  }
  if (!written) {
    // Once per cause: a full disk fails every periodic flush the same way. One that gave way
    // is followed at once by the flush that says whether it failed.
    if (!gave_way && error != last_flush_error_)
      warn("flushing the profile to {} failed: {}", output_, error);
    if (!gave_way) last_flush_error_ = error;
    if (gpu != nullptr) gpu->requeue(std::move(d.gpu));
    count_unwritten_events(d, error);
    return false;
  }
  last_flush_error_.clear();
  process_id_.store(store_.process_id(), std::memory_order_release);
  if (final) finished_ = true;
  if (kind == FlushKind::kExec) exec_flushed_.store(true, std::memory_order_relaxed);
  retire_written_threads(d, final, gpu);
  return true;
}

// Every thread's snapshot into `d` (the collection window's start applied, the sampler's ring
// drained first), with what they lost.
SnapshotLosses Runtime::snapshot_threads(FlushData& d, uint64_t now, bool final) {
  std::vector<ThreadState*> threads;
  {
    std::lock_guard tl(threads_mu_);
    threads = threads_;
  }
  SnapshotLosses losses;
  uint64_t window_ticks = 0;
  if (int64_t opened = window_.opened_mono_ns(); opened != 0 && clock_.ns_per_tick() > 0)
    window_ticks =
        clock_.ticks0() + uint64_t(double(opened - clock_.mono0()) / clock_.ns_per_tick());
  for (ThreadState* t : threads) {
    if (window_ticks != 0) t->start_no_earlier_than(window_ticks);
    sampler_drain(*t);
    size_t k = d.threads.size();
    d.threads.push_back(take_snapshot(
        *t, clock_, now, k < spare_rows_.size() ? std::move(spare_rows_[k]) : NodeRows{}, final));
    call_sites_.name(d.threads.back(), routines_);
    losses.add(d.threads.back(), *t);
  }
  if (final && sampler_on()) sampler_log_unwinding(threads, clock_.ns_per_tick());
  return losses;
}

// A process that intercepted nothing though it looks numeric says so, at its last flush; a Python
// interpreter without sonde's hook too.
void Runtime::note_unmeasured(const FlushData& d, bool final) {
  if (!measured_seen_) {
    // Intercepted = a library call or a Python frame (a pure-Python program, whose frames the
    // Python hook recorded, is no failed interception), not a user region. Looked for at every
    // flush until found: threads that ended are freed after the flush that wrote them.
    std::vector<bool> measured_kind = routines_.measured_kinds();
    uint64_t measured = 0;
    for (const ThreadSnapshot& s : d.threads) {
      for (const NodeRow& row : s.nodes) measured += row.calls > 0 && measured_kind[row.routine];
    }
    measured_seen_ = measured > 0;
  }
  bool forked = process_.origin == "fork";
  // A collection window that never opened measured nothing by request: its note says so, and
  // a linking problem would send the user after one that does not exist.
  bool window_shut = window_.requested() && window_.opened_mono_ns() == 0;
  if (final && !measured_seen_ && !window_shut && looks_numeric(forked) &&
      !(forked && python_without_hook(facts_))) {  // the python-hook note below says what it is
    // Helpers of a run (shells, ls) intercept nothing by nature: only the root says so aloud.
    add_note("no-calls",
             "nothing was intercepted in this process: if it calls BLAS, its BLAS may be linked "
             "statically or opened with RTLD_DEEPBIND, where LD_PRELOAD cannot reach it, or "
             "called through what dlsym gave for the library's own handle (ctypes.CDLL(...)"
             ".cblas_dgemm), which goes past it",
             root());
  }
  if (final && python_without_hook(facts_))
    add_note("python-hook", python_hook_note(facts_), false);
}

// run_info's rows and the notes, as of this flush: the environment sonde may keep, the clock,
// the counts kept beside the threads, the GPU's and the info providers' facts.
void Runtime::collect_info(FlushData& d, GpuBackend* gpu) {
  std::vector<InfoProvider> providers;
  {
    std::lock_guard nl(notes_mu_);
    providers = providers_;
  }
  d.info = allowed_environment();
  d.info.emplace_back("clock.source", clock_.tsc() ? "tsc" : "monotonic");
  d.info.emplace_back("clock.ns_per_tick", fmt::format("{:.9f}", clock_.ns_per_tick()));
  d.info.emplace_back("sonde.version", SONDE_VERSION);
  forks_unwritten_.store(false);  // a fork from here on asks for another flush
  if (uint32_t forks = forks_.load(std::memory_order_relaxed); forks > 0)
    d.info.emplace_back("process.forks", std::to_string(forks));
  // The CPUs the process's first thread may run on as of this flush: OMP_PROC_BIND binds it,
  // and every thread and process it starts, after runs.affinity_cores was read at start (a
  // red-team tune's pinning stage had bound a torch program to one core, nothing said).
  if (cpu_set_t set; ::sched_getaffinity(pid(), sizeof set, &set) == 0)
    d.info.emplace_back("process.affinity_cores", std::to_string(CPU_COUNT(&set)));
  // The host's 1-minute load average as of this flush (the last one's: the run's end), its
  // processes included: what the thread advice holds against the cores (a red-team run at load
  // 5-7 on 2 cores was told to double its threads, and ran 3 to 30 times slower so).
  if (std::string load = read_proc_file("/proc/loadavg", 64); !load.empty())
    d.info.emplace_back("host.load", load.substr(0, load.find(' ')));
  // What the host's CPUs did from this process's start to now, the run's own threads included:
  // the load average lags by a minute, and a red-team run after others read 3.0 cores of other
  // programs where one busy loop ran (and was told to add threads that made it 3.5x slower).
  if (host_cpu0_) {
    if (auto busy = host_busy_cpu_s(host_cpus_)) {
      d.info.emplace_back("host.cpu_busy_s", fmt::format("{:.3f}", *busy - *host_cpu0_));
      d.info.emplace_back(
          "host.cpu_window_s",
          fmt::format("{:.3f}", 1e-9 * double(monotonic_ns() - host_cpu0_mono_ns_)));
    }
  }
  // How long the process's first thread (the training loop's, mostly) stood waiting for a core
  // since this process's start: beside its CPU time and its life, what it spent blocked.
  if (first_thread_runq0_) {
    if (auto now = thread_runq_wait_s(pid()); now && *now >= *first_thread_runq0_)
      d.info.emplace_back("thread.runq_s", fmt::format("{:.3f}", *now - *first_thread_runq0_));
  }
  // The cgroup's CPU quota, and how often it stopped the cgroup's threads since this process
  // began (core/cpu_quota.hpp): cgroup-wide counters, the run's own throttling among them.
  if (cpu_quota_read_.load(std::memory_order_acquire) && cpu_quota_) {
    d.info.emplace_back("cpu.quota", fmt::format("{:.3f}", cpu_quota_->cores));
    if (auto now = read_cpu_throttling(*cpu_quota_);
        now && throttling0_ && process_.origin != "fork") {  // a fork: its parent's start
      d.info.emplace_back("cpu.periods", std::to_string(now->periods - throttling0_->periods));
      d.info.emplace_back("cpu.throttled_periods",
                          std::to_string(now->throttled - throttling0_->throttled));
      d.info.emplace_back(
          "cpu.throttled_s",
          fmt::format("{:.3f}", 1e-9 * double(now->throttled_ns - throttling0_->throttled_ns)));
    }
  }
  if (const char* isa = vector_isa()) d.info.emplace_back("cpu.vector_isa", isa);
  if (const char* bf16 = cpu_bf16()) d.info.emplace_back("cpu.bf16", bf16);
  if (sampler_on()) d.info.emplace_back("sample.hz", std::to_string(config_.sample_hz));
  if (int status = exit_status_.load(std::memory_order_relaxed); status >= 0)
    d.info.emplace_back("exit.status", std::to_string(status));
  if (adaptive_.mask != 0) d.info.emplace_back("adaptive.rate", std::to_string(adaptive_.mask + 1));
  if (gpu != nullptr) gpu->info(d.info);
  if (!d.threads.empty()) {
    d.info.emplace_back("fpu.ftz", d.threads.front().ftz ? "1" : "0");
    d.info.emplace_back("fpu.daz", d.threads.front().daz ? "1" : "0");
  }
  for (InfoProvider p : providers) {
    p([](const char* k, const char* v,
         void* ctx) { static_cast<FlushData*>(ctx)->info.emplace_back(k, v); },
      &d);
  }
  {  // after the providers, which may add notes of their own
    std::lock_guard nl(notes_mu_);
    d.notes = notes_;
  }
  // Asked where the loader may be (not in a signal's flush); once found, kept.
  if (!facts_.has("openmp.runtime") && !loader_free())
    if (std::string omp = openmp_runtime(); !omp.empty()) facts_.set("openmp.runtime", omp);
  facts_.append_to(d.info);
}

// Ended threads freed in one flush from which on the freed memory is trimmed: a batch
// (thread_ended asks for a flush at 256), not the odd thread a periodic flush finds.
constexpr size_t kTrimAfter = 64;

void Runtime::retire_written_threads(const FlushData& d, bool final, GpuBackend* gpu) {
  // Threads that had ended before this snapshot are written for good: free them, so memory
  // follows the live threads and their call paths, not every thread the process ever had.
  std::vector<ThreadState*> done;
  for (const ThreadSnapshot& t : d.threads) {
    if (t.ended_ns && !final) done.push_back(const_cast<ThreadState*>(t.state));
  }
  ended_unflushed_.fetch_sub(std::min<uint32_t>(uint32_t(done.size()), ended_unflushed_.load()),
                             std::memory_order_relaxed);
  ended_flush_asked_.store(false, std::memory_order_relaxed);  // the next ended thread may ask
  if (!done.empty()) {
    {
      AsyncSignalBlock no_signals;
      std::lock_guard tl(threads_mu_);
      std::erase_if(threads_, [&](ThreadState* t) {
        return std::find(done.begin(), done.end(), t) != done.end();
      });
    }
    for (ThreadState* t : done) {
      if (gpu != nullptr) gpu->thread_gone(t, store_.node_ids(t));
      store_.forget_thread(t);
      delete t;
    }
    // Each thread's state came from the arena glibc gave that thread, and what is freed there
    // stays the process's: a thread per request under the Python hook grew the RSS 40 KB a
    // thread (322 MB after 8,000, 25 MB once trimmed; 9 MB without sonde). A batch's worth
    // is handed back to the system here, in the flusher, off every host thread's path.
    if (done.size() >= kTrimAfter) ::malloc_trim(0);
  }
}

// The trace events a failed flush drained are gone from their rings: counted as dropped, so
// the next flush that is written has their trace_drops row and a note saying why (a full disk
// once left the tree with 0 events and no word of the loss).
void Runtime::count_unwritten_events(const FlushData& d, const std::string& error) {
  bool lost = false;
  for (const ThreadSnapshot& t : d.threads) {
    if (t.events.empty() || t.state->trace == nullptr) continue;
    t.state->trace->count_unwritten(t.events.size());
    lost = true;
  }
  if (lost) trace_loss_error_ = error;
}

void Runtime::flush_from_signal(int sig) {
  if (t_internal || finished_ || filtered()) return;
  // Without a flusher the request would wait out its 3 s for nobody; the profile has the note
  // start_flusher wrote, and what came after the last flush is lost.
  if (!flusher_running_.load()) return;
  exit_flush_started_.store(false);
  std::uint32_t progress = writers_progress_.load();
  pending_signal_.store(sig);
  flush_request_.ring();
  timespec start;
  clock_gettime(CLOCK_REALTIME, &start);
  auto wait_until = [this](timespec deadline) {
    int rc;
    while ((rc = sem_timedwait(&flush_done_, &deadline)) == -1 && errno == EINTR) {
    }
    return rc == 0;
  };
  // Bounded: a crashed heap must not turn a crash into a hang.
  bool done = wait_until(timespec{start.tv_sec + 3, start.tv_nsec});
  if (done) return;
  if (sig != kExitRequest) {
    // A flush waiting its turn for the file while the run's other writers take theirs (a
    // Pool's workers ended together by SIGTERM, with their parent writing too: a worker's
    // profile, a CI run found, lost its end at 3 s) waits on while they are seen to progress,
    // 3 s past the last sign, up to kExitFlushWait in all. A flusher stuck on a lock the
    // interrupted thread holds gives no sign, and ends at 3 s as before.
    for (timespec mark = start;;) {
      timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      if (std::uint32_t seen = writers_progress_.load(); seen != progress) {
        progress = seen;
        mark = now;
      }
      if (now.tv_sec - mark.tv_sec >= 3 || now.tv_sec - start.tv_sec >= kExitFlushWait) return;
      long ns = now.tv_nsec + 250'000'000;
      if (wait_until(timespec{now.tv_sec + ns / 1'000'000'000, ns % 1'000'000'000})) return;
    }
  }
  // An _exit (no crash) whose flush is under way is waiting its turn for the file that every
  // process of the run writes (a thousand children ending together lost 86 % of their calls
  // at 3 s): it may take as long as SQLite waits for the lock, and a little more. A periodic
  // flush waiting for the lock when the request came gives up at once (Store::give_up_when),
  // so the request's flush starts, and this wait with it.
  if (exit_flush_started_.load()) {
    done = wait_until(timespec{start.tv_sec + kExitFlushWait, start.tv_nsec});
  }
  if (!done && log_level() >= LogLevel::kWarn) {
    // On stderr: the file cannot say it, its writer is what did not finish. No allocation:
    // _exit may be called from a signal handler.
    char line[192];
    int n = std::snprintf(line, sizeof line,
                          "sonde: process %d ended (_exit) before its "
                          "profile was written; its calls since the last flush are lost\n",
                          int(getpid()));
    if (n > 0) say_on_stderr(std::string_view(line, std::min(size_t(n), sizeof line - 1)));
  }
}

constexpr size_t kFlusherStack = size_t(1) << 20;

void Runtime::start_flusher() {
  // The real pthread_create: sonde's own wrapper would measure the flusher as a host thread.
  using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static auto create = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (create == nullptr) create = &pthread_create;
  pthread_t thread;
  auto body = [](void* self) -> void* {
    auto* rt = static_cast<Runtime*>(self);
    // Never std::terminate for the host: what escapes the loop (a std::bad_alloc outside a
    // flush, which catches its own) ends the flusher alone, and an exit waiting for it is let go.
    try {
      rt->flusher_loop();
    } catch (...) {
      sem_post(&rt->flush_done_);
    }
    return nullptr;
  };
  // Born with every signal blocked: one that reached it before flusher_loop blocked them would
  // wait for a flush that only this thread can do (3 s, then death without it).
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  // Joinable: credentials_changing() waits for it to end. Never joined otherwise, as the
  // process ends with it.
  flusher_stop_.store(false);
  // Its own stack size, not RLIMIT_STACK's (glibc's default): under `ulimit -s 64` a periodic
  // flush overflowed it and the host died of SIGSEGV. 1 MiB: flushes ran in 128 KiB here.
  pthread_attr_t attr;
  bool sized = pthread_attr_init(&attr) == 0;
  if (sized) sized = pthread_attr_setstacksize(&attr, kFlusherStack) == 0;
  int rc = create(&thread, sized ? &attr : nullptr, body, this);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (rc == 0) flusher_thread_ = thread;
  flusher_running_.store(rc == 0);
  if (rc == 0) return;
  // Said in the profile at once, by a flush on this thread: the process may end by _exit or a
  // signal before any other flush (a fork child under `ulimit -u` never had one).
  add_note("flush",
           fmt::format("sonde's flusher thread could not be started ({}): no periodic "
                       "flushes, and calls after the last flush are lost if this "
                       "process ends by _exit or a signal",
                       std::strerror(rc)),
           true);
  flush(FlushKind::kExplicit);
}

void Runtime::flusher_loop() {
  t_internal = true;
  // libstdc++'s per-thread exception state, made now, while there is memory: where libsonde
  // was loaded by dlopen (the in-process launch) that state is dynamic TLS, allocated at its
  // first use, and a std::bad_alloc thrown by a flush at the host's memory limit was that use:
  // glibc aborted the process ("cannot allocate memory for thread-local data").
  // (Stored to a volatile: libstdc++ declares the function pure, so an unused call is dropped.)
  volatile int uncaught = std::uncaught_exceptions();
  (void)uncaught;
  flusher_tid_.store(pid_t(syscall(SYS_gettid)));
  reserve_high_descriptors();  // grown at start already where the host had one thread: cheap
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the host's signals go to the host's threads
  // Here, beside the host's start rather than inside it (a few files: 0.1 ms where mountinfo
  // is long); a flush before it (a process that ends at once) records no quota.
  if (!cpu_quota_read_.load(std::memory_order_acquire)) {
    try {  // at the host's memory limit: no quota said, and the flusher lives on
      if ((cpu_quota_ = own_cpu_quota())) throttling0_ = read_cpu_throttling(*cpu_quota_);
    } catch (const std::bad_alloc&) {
      cpu_quota_.reset();
    }
    cpu_quota_read_.store(true, std::memory_order_release);
  }
  double since_flush = 0;  // s waited since the last flush, in the sampler's drains
  bool first = true;
  WatchedThread watched = watched_;
  bool watched_ended = false;
  double fork_due = 0, last_fork_flush = -kForkFlushGapS;  // monotonic s; 0: none due
  for (;;) {
    // With no host thread attached, or the watched one ended (pthread_exit or a raw SYS_exit,
    // which leaves no trace in live_threads_), look often for the moment sonde's thread is the
    // last one.
    bool orphan = live_threads_.load(std::memory_order_acquire) <= 0 || watched_ended;
    double interval = orphan ? kOrphanPoll : config_.flush_interval_s;
    // With periodic flushes off (0) none: a flush then comes only at exit, exec or a signal.
    first = first && process_id_.load(std::memory_order_acquire) == 0;
    if (first && !orphan && interval > 0) interval = std::min(interval, kFirstFlushS);
    // The sampler's rings hold about two seconds: they are emptied every second in between.
    bool drain_only = false;
    if (sampler_on() && !orphan) {
      if (interval <= 0 || interval - since_flush > 1.0) {
        drain_only = true;
        interval = 1.0;
      } else {
        interval = std::max(0.001, interval - since_flush);
      }
    }
    double fork_wait = fork_due > 0 ? std::max(0.001, fork_due - monotonic_s()) : 0;
    bool for_fork = fork_due > 0 && (interval <= 0 || fork_wait <= interval);
    if (for_fork) {
      interval = fork_wait;
      drain_only = false;
    }
    timespec deadline;
    if (interval > 0) {
      clock_gettime(CLOCK_MONOTONIC, &deadline);
      auto ns = int64_t(interval * 1e9);
      deadline.tv_sec += ns / 1000000000;
      deadline.tv_nsec += ns % 1000000000;
      if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000;
      }
    }
    Doorbell::Woke woke = flush_request_.wait(interval > 0 ? &deadline : nullptr,
                                              watched_ended ? WatchedThread{} : watched);
    if (woke == Doorbell::Woke::kWatchedEnded) watched_ended = true;
    bool attached = live_threads_.load(std::memory_order_acquire) > 0;
    if ((!attached || watched_ended) && !exiting_ && alone_in_process()) {
      // The host's last thread ended. Through glibc's pthread_exit (main's, or a fork child's
      // only thread) glibc ends the process with exit(0), and would have without this thread;
      // a thread that left by a raw SYS_exit ran no exit path: end as the kernel would.
      if (!attached) std::exit(0);
      end_without_host();
    }
    if (woke == Doorbell::Woke::kWatchedEnded) continue;
    if (woke == Doorbell::Woke::kRung && fork_due == 0 && forks_unwritten_.load() &&
        pending_signal_.load() == 0 && !flusher_stop_.load()) {
      fork_due = std::max(monotonic_s() + kForkBurstS, last_fork_flush + kForkFlushGapS);
      continue;
    }
    bool fork_flush = for_fork && woke == Doorbell::Woke::kTimeout;
    if (fork_flush) {
      fork_due = 0;
      last_fork_flush = monotonic_s();
    }
    if (woke == Doorbell::Woke::kTimeout && drain_only) {
      since_flush += interval;
      drain_samples();
      continue;
    }
    // Looking for the last thread is no reason for a periodic flush more often than asked.
    if (woke == Doorbell::Woke::kTimeout && attached && watched_ended && !fork_flush) {
      since_flush += interval;
      if (config_.flush_interval_s <= 0 || since_flush < config_.flush_interval_s) continue;
    }
    since_flush = 0;
    first = false;
    fork_due = 0;  // this flush writes the forks' count too
    int sig = pending_signal_.exchange(0);
    if (sig == 0 && flusher_stop_.load()) return;
    if (sig != 0) {
      exit_flush_started_.store(true);
      std::string reason = sig == kExitRequest ? "_exit" : fmt::format("signal {}", sig);
      bool ok;
      {
        // A signal's interrupted thread may hold the loader's lock; an _exit's is in sonde's
        // wrapper, holding nothing.
        std::optional<LoaderFree> no_loader;
        if (sig != kExitRequest) no_loader.emplace();
        ok = flush(FlushKind::kSignal, reason.c_str());
      }
      end_helpers();  // a death by SIGINT after the interpreter's atexit (KeyboardInterrupt)
      say_where_written(ok);
      sem_post(&flush_done_);
    } else {
      flush(FlushKind::kPeriodic);
    }
  }
}

void Runtime::end_without_host() {
  // The process ends with the status its last thread gives: the host's main thread's, read
  // while it is still there to read (a host thread other than main that ended last is gone
  // from /proc with its status: 0 then).
  int code = std::max(0, main_thread_exit_code());
  // Nothing of the host is left to handle a signal, and all are blocked here: a SIGTERM for the
  // process waited forever. Each now takes its default action (stops are ignored: nothing is
  // left to continue), so a signal during this last flush ends the process as it would have.
  for (int sig = 1; sig < SIGRTMIN; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction action {};
    bool stops = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
    action.sa_handler = stops ? SIG_IGN : SIG_DFL;
    real_sigaction(sig, &action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  exiting_.store(true);
  close_exit_gate();
  bool ok = flush(FlushKind::kExit, "thread exit");
  say_where_written(ok);
  // SYS_exit, as the host's thread left: no exit handler runs (none did alone).
  for (;;) syscall(SYS_exit, code);
}

bool Runtime::credentials_changing() {
  // Not in a vfork child (the parent's thread is not its own) nor without a flusher; nor on a
  // filtered thread, where the flush and the thread's start again may be what kills.
  if (filtered() || getpid() != pid()) return false;
  // Written first, while the process may still open the file: a root that drops to another
  // user may not be able to open the profile it created (0644) once it has.
  flush(FlushKind::kExplicit);
  return stop_flusher();
}

bool Runtime::stop_flusher() {
  // One stopper at a time (a fork's pause, a credentials change on another thread): a second
  // join of the same thread fails, and its failure would let the flusher run on.
  std::lock_guard lock(stop_mu_);
  if (!flusher_running_.load()) return false;
  flusher_stop_.store(true);
  flush_request_.ring();
  // Bounded, as every wait for the flusher: a flush under way (up to SQLite's wait for the
  // other writers) finishes first. Past it the thread stays, and the call goes as it would.
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += kExitFlushWait;
  if (pthread_timedjoin_np(flusher_thread_, nullptr, &deadline) != 0) {
    flusher_stop_.store(false);
    return false;
  }
  flusher_running_.store(false);
  // The join returns as the thread's exit clears its id, before the kernel takes it out of the
  // thread group: a call that needs one thread (unshare(CLONE_NEWUSER)) made then still failed,
  // 1 time in 6. Bounded (200 ms), as every wait for this thread.
  pid_t tid = flusher_tid_.exchange(0);
  for (int i = 0; tid != 0 && i < 4000 && syscall(SYS_tgkill, getpid(), tid, 0) == 0; ++i) {
    timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

bool Runtime::flusher_paused_for_fork() {
  // Not in a vfork child, nor on a filtered thread (the thread's start again may be what
  // kills). The fork asks for its flush as always (child_forked): the flusher started again
  // finds the request rung. Threads forking at once share one pause: each of two joined the
  // same flusher, glibc refused the second join, whose failure let the flusher run on, and the
  // first waited out the join's whole bound (95 s for each collision: a thread pool whose
  // tasks start multiprocessing's fork children, a red-team find on 3.12 and 3.13).
  if (filtered() || getpid() != pid()) return false;
  std::lock_guard lock(fork_pause_mu_);
  if (forks_in_flight_++ == 0) paused_for_forks_ = stop_flusher();
  return true;
}

void Runtime::flusher_resumed_after_fork() {
  if (getpid() != pid()) return;  // the child: its own flusher runs already
  std::lock_guard lock(fork_pause_mu_);
  if (forks_in_flight_ > 0 && --forks_in_flight_ > 0) return;
  bool restart = std::exchange(paused_for_forks_, false);
  if (restart && !flusher_running_.load() && !finished_) start_flusher();
}

void Runtime::credentials_changed() {
  // A flusher refused now (the new uid's RLIMIT_NPROC) is said in the profile, as at start.
  start_flusher();
}

void Runtime::drain_samples() {
  std::lock_guard lock(store_mu_);
  if (finished_) return;
  std::lock_guard tl(threads_mu_);
  for (ThreadState* t : threads_) sampler_drain(*t);
}

}  // namespace sonde
