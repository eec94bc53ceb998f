#include "runtime/runtime.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "core/adaptive_timing.hpp"
#include "core/host_cpu.hpp"
#include "core/signal_block.hpp"
#include "core/thread_local_state.hpp"
#include "core/window.hpp"
#include "process/run_info.hpp"
#include "process/sampler.hpp"
#include "process/signals.hpp"
#include "runtime/fpu_mode.hpp"
#include "runtime/last_thread.hpp"
#include "runtime/python_fork.hpp"
#include "runtime/python_presence.hpp"
#include "sonde/output_name.hpp"
#include "sonde/preload_path.hpp"
#include "sonde/quiet_write.hpp"
#include "sonde/rank_launcher.hpp"
#include "store/fd_guard.hpp"
#include "store/rank_files.hpp"
#include "symbols/loaded_objects.hpp"
#include "symbols/real_symbol.hpp"

namespace sonde {

std::atomic<Runtime*> Runtime::instance_{nullptr};

namespace {

// How long the exit waits for the helpers named to end (process/exit_helpers.hpp): a resource
// tracker ends within milliseconds of its pipe's end; one another process still holds does not.
constexpr int kExitHelpersBudgetMs = 2000;

pthread_key_t g_thread_key;  // its destructor marks a thread's end

void on_thread_exit(void* state) {
  auto* t = static_cast<ThreadState*>(state);
  Runtime* rt = Runtime::get();
  // Under a seccomp filter its counters and timer stay: closing them takes system calls.
  bool filtered = rt != nullptr && rt->filtered();
  if (t->counter_backend != nullptr && !filtered) {
    t->counter_backend->stop_thread(t->counter_handle);
    t->counter_handle = -1;  // a late frame's read fails instead of reading a reused descriptor
  }
  if (!filtered) sampler_disarm(*t);
  t->mark_ended(now_ticks(), !filtered);
  // The flusher frees the state once written; a later call on this thread (another key's
  // destructor) starts a new one.
  t_state = nullptr;
  if (rt != nullptr) rt->thread_ended();
}

pid_t current_tid() { return pid_t(syscall(SYS_gettid)); }

std::string realpath_of(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// "pid:process_id" as passed between processes of a run.
bool parse_process_ref(const char* text, pid_t& pid, int64_t& id) {
  if (text == nullptr) return false;
  long long p = 0, i = 0;
  if (std::sscanf(text, "%lld:%lld", &p, &i) != 2) return false;
  pid = pid_t(p);
  id = i;
  return true;
}

// Whether the CUDA driver is loaded. dlopen(RTLD_NOLOAD) of a name that is not searches the
// whole library path before it says so (50 failed opens, at every process's start): the loaded
// objects' names are looked at first, and dlopen, which also knows sonames, asked only where
// one may be the driver.
bool cuda_driver_loaded() {
  bool maybe = !loaded_object({"libcuda"}).empty();
  return maybe && dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) != nullptr;
}

void fork_prepare() {
  if (auto* rt = Runtime::get()) rt->fork_prepare();
}
void fork_parent() {
  if (auto* rt = Runtime::get()) {
    rt->fork_parent();
    rt->child_forked();
  }
}
void fork_child() {
  if (auto* rt = Runtime::get()) rt->fork_child();
}
// A vfork child that calls exit shares the parent's memory: nothing of sonde's is its to end.
// A filtered thread asks nothing (getpid is a system call too): it does not flush.
void at_exit() {
  Runtime* rt = Runtime::get();
  if (rt != nullptr && !rt->filtered() && getpid() == rt->pid()) rt->exit_flush();
}
void gpu_at_exit() {
  Runtime* rt = Runtime::get();
  if (rt != nullptr && !rt->filtered()) rt->drain_gpu();
}

}  // namespace

void Runtime::init() {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  remember_stderr();
  remember_python_presence();
  auto* rt = new Runtime();
  rt->start();
}

std::string Runtime::choose_output(std::string path, bool claim) {
  path = absolute(path);
  // A device, FIFO or directory is nothing a profile can go into, nor beside (/dev/null.<pid>);
  // nor can a child join one (SQLite "wrote" to /dev/null and the flush failed, no such table).
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return {};
  if (!claim) return path;  // joins the run's file
  // Claimed only where no file has the name, never overwritten: of two runs started at once
  // into one name, the second writes beside it rather than into the first one's file. The claim
  // is the blank profile linked in whole where the folder can hold a file of no name (a process
  // killed as it starts leaves no file or a whole one), else an empty file the store fills.
  int blank = open_blank_profile(output_dir(path));
  bool linked = false;
  for (int n = 0; n <= kOutputAlternatives; ++n) {
    std::string name = n == 0 ? path : alternative_output(path, pid(), n);
    int rc = blank >= 0 ? link_blank_profile(blank, name) : -1;
    if (rc == 0) {
      linked = true;
    } else if (rc != EEXIST) {  // no blank, or it cannot be linked (no /proc): an empty file
      int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      rc = fd >= 0 ? 0 : errno;
      if (fd >= 0) {
        keep_owner_read_write(fd);
        close(fd);
      }
    }
    if (rc == 0) {
      if (blank >= 0) close(blank);
      // The file is new, so a journal beside it is another file's: left by a writer of the
      // name's last owner killed mid-flush, then the profile removed (`kill -9`, `rm prof.db`).
      // SQLite would take it as this file's hot journal and roll its pages into the new profile.
      for (const char* suffix : {"-journal", "-wal", "-shm"}) unlink((name + suffix).c_str());
      output_origin_ = linked ? OutputOrigin::kLinkedBlank : OutputOrigin::kClaimedEmpty;
      if (n > 0) warn("{} already exists; writing this run's profile to {}", path, name);
      return name;
    }
    if (rc != EEXIST) {  // said by open_output: SQLite's open would say "No such file" for EROFS
      claim_errno_ = rc > 0 ? rc : 0;
      break;
    }
  }
  if (blank >= 0) close(blank);
  return path;
}

namespace {
// The signal handlers' flush (process/signals.hpp): this process's own, not a vfork child's.
void flush_at_signal(int sig, pid_t self) {
  Runtime* rt = Runtime::get();
  if (rt != nullptr && self == rt->pid()) rt->flush_from_signal(sig);
}
}  // namespace

void Runtime::start() {
  clock_.init();
  config_ = parse_config([](const char* name) -> const char* { return std::getenv(name); });
  set_fpu_mode(config_.ftz);  // the loading thread, before main and the program's constructors
  window_.init({config_.delay_s, config_.steps, config_.step_region, config_.delay_until_ns},
               clock_.mono0(), clock_.realtime0());
  pid_ = getpid();
  trace_budget_ = std::make_unique<TraceBudget>(config_.trace_memory_mb << 20);
  bool root = config_.run_id.empty();
  // Ranks of one job share a run id, so `sonde merge` can tell their files from another run's.
  std::vector<std::string> args = command_line_args();
  RankEnv rank =
      process_rank_env([](const char* name) -> const char* { return std::getenv(name); }, args);
  run_id_ = !root ? config_.run_id : rank.job.empty() ? new_run_uuid() : job_run_uuid(rank.job);
  identify_process(rank, root, args);
  if (!open_output(rank, root)) return;
  int64_t prepared_ns = monotonic_ns();
  // As LD_PRELOAD can carry it (a path with a space: through a link, sonde/preload_path.hpp).
  std::string self = object_path_of(reinterpret_cast<const void*>(&Runtime::init));
  std::string preloadable = preloadable_path(self);
  env_preload_ = "LD_PRELOAD=" + (preloadable.empty() ? self : preloadable);
  env_output_ = "SONDE_OUTPUT=" + output_;
  if (!config_.output.empty() && config_.output != output_)
    env_given_output_ = "SONDE_OUTPUT=" + config_.output;
  env_run_ = "SONDE_RUN_ID=" + run_id_;
  run_ = collect_run_info(run_id_, process_.command, config_.trace, clock_.realtime0());
  process_.host = run_.host;
  read_peaks(root);
  flush_request_.reset();
  watched_ = this_thread_to_watch();
  sem_init(&flush_done_, 0, 0);
  pthread_key_create(&g_thread_key, on_thread_exit);
  start_collectors(root);
  instance_.store(this, std::memory_order_release);
  attach_current_thread();
  // Programs linked against the driver have it loaded by now; the runtime (libcudart) opens it
  // later, through the dlopen hook.
  if (cuda_driver_loaded()) cuda_loaded();

  // No flush here: the flusher's first comes kFirstFlushS after start (runtime_flush.cpp), so
  // a process that ends before it is written once, at its end.
  pthread_atfork(sonde::fork_prepare, sonde::fork_parent, sonde::fork_child);
  install_signal_handlers(flush_at_signal);
  // After the signal handlers: the sampler's signal comes through sonde's own handler.
  if (config_.sample_hz > 0 && sampler_init(config_.sample_hz)) {
    if (t_state != nullptr) sampler_arm(*t_state);
    sample_other_threads();
  }
  std::atexit(at_exit);
  start_flusher();
  watch_for_python_start(args);
  log(LogLevel::kInfo, "profiling pid {} into {}", pid(), output_);
  // What a start costs, for docs/performance.md's fixed costs (SONDE_LOG=debug).
  log(LogLevel::kDebug, "start: {:.2f} ms to the prepared file, {:.2f} ms after it",
      1e-6 * double(prepared_ns - clock_.mono0()), 1e-6 * double(monotonic_ns() - prepared_ns));
}

// Who this process is in the run: its origin (root, exec, child), parent row and rank.
void Runtime::identify_process(const RankEnv& rank, bool root,
                               const std::vector<std::string>& args) {
  process_.rank = rank.rank;
  process_.world_size = rank.world_size;
  process_.local_rank = rank.local_rank;
  // The attempt of a job torchrun restarts (--max_restarts): each writes a file per rank, and
  // the readers tell the attempts apart by it (store/rank_files.cpp, sonde merge).
  if (const char* n = std::getenv("TORCHELASTIC_RESTART_COUNT"); rank.worker && n && *n)
    facts_.set("torch.restart_count", n);
  process_.pid = pid();
  process_.ppid = getppid();
  process_.command = redact_arguments(args, config_.record_args);
  process_.started_ns = clock_.realtime0();
  if (::sched_getaffinity(0, sizeof host_cpus_, &host_cpus_) == 0) {
    host_cpu0_ = host_busy_cpu_s(host_cpus_);
    host_cpu0_mono_ns_ = monotonic_ns();
  }
  first_thread_runq0_ = thread_runq_wait_s(pid());
  pid_t ref_pid = 0;
  int64_t ref_id = 0;
  if (parse_process_ref(config_.exec_of.c_str(), ref_pid, ref_id) && ref_pid == pid()) {
    process_.origin = "exec";
    process_.parent_process_id = ref_id;
    // The image that said where the profile goes exec'd this one (python3 -m sonde's program
    // running os.execv): this one says it at its exit, as that one would have.
    if (!config_.say_written.empty()) {
      say_written_ = config_.say_written;
      env_say_ = "SONDE_SAY_WRITTEN=" + say_written_;
    }
  } else if (root) {
    process_.origin = "root";
  } else {
    process_.origin = "child";
    if (parse_process_ref(config_.process_ref.c_str(), ref_pid, ref_id) &&
        ref_pid == process_.ppid) {
      process_.parent_process_id = ref_id;
    }
  }
  unsetenv("SONDE_EXEC_OF");
  unsetenv("SONDE_SAY_WRITTEN");
}

// The profile's file, claimed (a root, or a rank) or joined, and prepared; false when this
// process runs unprofiled (said why).
bool Runtime::open_output(const RankEnv& rank, bool root) {
  // A rank writes its own file (prof.db -> prof.rank<R>.db), even when it is the child of a
  // profiled launcher (LD_PRELOAD on mpirun): ranks on many nodes must never share one SQLite
  // file. Its own children inherit that file's name, and join it.
  std::string requested =
      config_.output.empty() ? fmt::format("sonde-{}.db", pid()) : config_.output;
  bool claim = root;
  if (rank.rank >= 0 && !is_rank_output(requested, rank.rank)) {
    requested = rank_output(requested, rank.rank);
    claim = true;
    process_.parent_process_id = 0;  // the launcher's process is in the launcher's file
    file_named_for_ = rank;
  } else if (rank.outer_task >= 0 && !is_any_rank_output(requested) &&
             !is_launcher_output(requested, rank.outer_task)) {
    // A launcher of ranks under an outer one (sonde/rank_launcher.hpp). Inside a rank (a shell
    // its program started) it is that rank's helper, and joins its file.
    requested = launcher_output(requested, rank.outer_task);
    claim = true;
    process_.parent_process_id = 0;
    file_named_for_ = rank;
  }
  std::string full = absolute(requested);
  // Its parent could not write this file, and said why: the processes a run starts (a pool's
  // spawn children, a shell's commands) each said it again, and on a full disk each claimed the
  // name as a run of its own, found the others' half-made files and wrote beside them ("p.db
  // already exists; writing this run's profile to p.1234.db"): 6 lines for a pool of two.
  if (!config_.unprofiled.empty() && config_.unprofiled == full) return false;
  // The run's processes that start after this one say nothing more (SONDE_UNPROFILED, compared
  // with the file each would write: a nested run into another file, or a child whose relative
  // name lands elsewhere, goes on as before).
  auto unprofiled = [&full] {
    setenv("SONDE_UNPROFILED", full.c_str(), 1);
    return false;
  };
  if (full.size() > kLongestProfilePath) {
    warn(
        "{}: the full path is {} bytes long, over the {} SQLite can open a file by; this "
        "process runs unprofiled",
        requested, full.size(), kLongestProfilePath);
    return unprofiled();
  } else if (output_name_length(full) > longest_output_name(full)) {
    warn(
        "{}: the name is {} characters long, over the {} its directory allows a profile (SQLite "
        "keeps <name>-journal beside it); this process runs unprofiled",
        requested, output_name_length(full), longest_output_name(full));
    return unprofiled();
  }
  output_ = choose_output(requested, claim);
  if (output_.empty()) {
    warn("{} is not a regular file (a device, FIFO or directory); this process runs unprofiled",
         config_.output);
    return unprofiled();
  }
  std::string error;
  install_fd_guard();  // before sonde's first connection: its files are never the host's
  // Grown here only where it costs nothing: a host already threaded at start (a program linked
  // to OpenBLAS starts its pool first) would wait for an RCU grace period here, inside its
  // measured time; sonde's own thread grows it then, at its start, where no host thread waits.
  if (alone_in_process()) reserve_high_descriptors();
  if (!store_.prepare(output_, error, output_origin_)) {
    if (claim_errno_ != 0)  // the claim's errno is the cause; SQLite's open then says another
      error = fmt::format("{}: {}", output_, std::strerror(claim_errno_));
    warn("cannot write the profile: {}; this process runs unprofiled", error);
    // An empty file claimed by this process would only make the next run pick another name.
    if (output_origin_ != OutputOrigin::kFound) {
      unlink(output_.c_str());
      unlink((output_ + "-journal").c_str());
    }
    return unprofiled();
  }
  store_ok_ = true;
  // The process that made the file: a rank's own file begins with the rank, not the run's root
  // (profile/run_summary.cpp reads which process was first).
  if (output_origin_ != OutputOrigin::kFound) facts_.set("output.claimed", "1");
  if (claim) {  // the run's children join this file
    setenv("SONDE_RUN_ID", run_id_.c_str(), 1);
    setenv("SONDE_OUTPUT", output_.c_str(), 1);
  }
  return true;
}

// The peaks file (SONDE_PEAKS, or the calibrated cache): its complaints said by the root only.
void Runtime::read_peaks(bool root) {
  PeaksText peaks;
  std::string peaks_error;
  errno = 0;
  if (!read_peaks_file(config_.peaks_file, peaks, peaks_error)) {
    // The cache nobody named, under a HOME this user cannot read (a service user, `setpriv`,
    // a container's HOME=/root): no peaks, and nothing for the host's stderr.
    bool unreadable_default = config_.peaks_default && errno == EACCES;
    if (root && !unreadable_default) warn("{}", peaks_error);
  } else if (!peaks.bad_lines.empty() && root) {
    warn("{}:{}{}", config_.peaks_file, peaks.bad_lines.front(),
         peaks.bad_lines.size() > 1
             ? fmt::format(" (and {} more lines ignored)", peaks.bad_lines.size() - 1)
             : std::string(", ignored"));
  }
  peaks_ = std::move(peaks.peaks);
}

// Hardware counters (SONDE_COUNTERS) and adaptive timing (SONDE_ADAPTIVE), which need them off.
void Runtime::start_collectors(bool root) {
  // Missing events are said once, by the root process; every process notes them in the file.
  counters_ = make_papi_backend(
      config_.counters,
      [this, root](const std::string& t, const std::string& m) { add_note(t, m, root); });
  if (config_.adaptive > 0) {
    // Both need every call's clock: a trace its events, counters their per-call deltas.
    if (config_.trace || counters_) {
      if (root) {
        warn("SONDE_ADAPTIVE is ignored with SONDE_TRACE or SONDE_COUNTERS: every call is timed");
      }
    } else {
      clock_.calibrate();  // the threshold is in ticks
      adaptive_ = make_adaptive_config(config_.adaptive, clock_.ns_per_tick());
    }
  }
}

void Runtime::mpi_rank_known(int rank, int world_size, const char* who) {
  std::string note;
  bool shared = false;  // torch.multiprocessing.spawn's ranks: an info note, not said
  {
    std::lock_guard lock(store_mu_);
    if (process_.rank < 0 && world_size > 1 && std::string_view(who) == "torch.distributed" &&
        process_.origin != "root") {
      // torch.multiprocessing.spawn's ranks, as it documents them: children sharing the run's
      // file, read as a merged one. A warning in every such report read as something gone
      // wrong. (A rank started alone under its own launcher writes a file of its own: warned.)
      shared = true;
      note = fmt::format(
          "torch.distributed says rank {} of {}, and the launcher's environment named no rank "
          "(torch.multiprocessing.spawn): the ranks share this profile, {} "
          "(docs/distributed.md)",
          rank, world_size, output_);
    } else if (process_.rank < 0 && world_size > 1) {
      note = fmt::format(
          "{} says rank {} of {}, but the launcher's environment named no rank "
          "(docs/distributed.md): this rank's profile is in {}, not a .rank{} file",
          who, rank, world_size, output_, rank);
    } else if (process_.rank >= 0 && (process_.rank != rank || process_.world_size != world_size)) {
      note = fmt::format(
          "{} says rank {} of {}, the launcher's environment rank {} of {}: the "
          "file is named after the environment, the processes row holds {}'s",
          who, rank, world_size, process_.rank, process_.world_size, who);
    }
    process_.rank = rank;
    process_.world_size = world_size;
  }
  if (!note.empty()) add_note("rank", note, !shared, shared ? "info" : "warning");
}

// Before its owner runs any call: the window only ever opens, and a bit set as it opens is
// dropped at the thread's next call.
void Runtime::hold_until_window(ThreadState& t) {
  t.window = &window_;
  if (window_.closed()) t.suppress |= ThreadState::kWindowClosed;
}

ThreadState* Runtime::attach_current_thread(bool yield_to_fork) {
  if (t_internal) return nullptr;
  if (t_state != nullptr) return t_state;
  if (filtered()) return nullptr;  // registering takes system calls (sandbox.cpp)
  uint64_t trace = config_.trace ? config_.trace_buffer : 0;
  // A thread the sampler armed from outside keeps its state (and its samples) when it starts
  // making measured calls.
  // Under the lock sample_other_threads holds, so that a thread it arms meanwhile is adopted
  // here, never given a second state.
  ThreadState* t = nullptr;
  {
    AsyncSignalBlock no_signals;
    // A fork's prepare handlers run in the reverse order of their registration: sonde's (it
    // holds this lock until the fork is done) can run before a library's own, and OpenBLAS's
    // joins its worker threads, one of which may be starting here: it waited for this lock,
    // the fork for it, and the host hung (the sampler's fork cell, 1 run in about 10 under
    // load). Such a thread gives way: it is not recorded, as a pool thread is without the
    // sampler.
    std::unique_lock lock(threads_mu_, std::defer_lock);
    if (!yield_to_fork) {
      lock.lock();
    } else {
      while (!lock.try_lock()) {
        if (forking_.load(std::memory_order_acquire)) return nullptr;
        sched_yield();
      }
    }
    t = sampler_on() ? sampler_adopt(current_tid()) : nullptr;
    if (t == nullptr) {
      t = new ThreadState(next_seq_++, current_tid(), now_ticks(), config_.max_depth, trace,
                          trace_budget_.get());
      hold_until_window(*t);
      threads_.push_back(t);
    }
  }
  live_threads_.fetch_add(1, std::memory_order_relaxed);
  if (counters_) {
    t->counter_handle = counters_->start_thread();
    if (t->counter_handle >= 0) {
      t->counter_backend = counters_.get();
      t->counters = uint32_t(counters_->events().size());
    } else {
      add_note("counters",
               fmt::format("SONDE_COUNTERS: counting failed on thread {}; its "
                           "counters are not recorded",
                           t->seq()),
               false);
    }
  }
  if (t->counters == 0) {
    t->adaptive = adaptive_;
    t->rng = adaptive_seed(now_ticks(), uint64_t(t->tid()) << 32 | t->seq());
  }
  t->errno_loc = &errno;  // this thread's: the state is the thread's own from here on
  t_state = t;
  pthread_setspecific(g_thread_key, t);
  sampler_arm(*t);
  return t;
}

void Runtime::sample_other_threads() {
  if (!sampler_on()) return;
  // sonde's flusher says its kernel id once it runs: on a loaded machine it had not yet when
  // the in-process launch armed the threads it found, and was armed and recorded as a host
  // thread with no call (a CI run: thread seq 1 empty, OpenBLAS's worker seq 2).
  for (int waited_ms = 0; flusher_running_.load() && flusher_tid_.load() == 0 && waited_ms < 1000;
       ++waited_ms) {
    timespec ms{0, 1'000'000};
    nanosleep(&ms, nullptr);
  }
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return;
  pid_t self = current_tid();
  uint64_t trace = config_.trace ? config_.trace_buffer : 0;
  AsyncSignalBlock no_signals;
  std::lock_guard lock(threads_mu_);
  auto known = [this](pid_t tid) {
    return std::any_of(threads_.begin(), threads_.end(),
                       [tid](const ThreadState* t) { return t->tid() == tid; });
  };
  while (dirent* e = readdir(dir)) {
    auto tid = pid_t(std::strtol(e->d_name, nullptr, 10));
    if (tid <= 0 || tid == self || tid == flusher_tid_.load() || known(tid)) continue;
    auto* t =
        new ThreadState(next_seq_, tid, now_ticks(), config_.max_depth, trace, trace_budget_.get());
    hold_until_window(*t);
    if (!sampler_arm_other(*t)) {  // it ended meanwhile, or too many
      delete t;
      continue;
    }
    ++next_seq_;
    threads_.push_back(t);
  }
  closedir(dir);
}

std::vector<std::string> Runtime::counter_events() const {
  return counters_ ? counters_->events() : std::vector<std::string>{};
}

void Runtime::cuda_loaded() {
  if (!store_ok_ || gpu_tried_.exchange(true)) return;
  start_gpu();
}

void Runtime::cuda_opening(const char* file, int flags) {
  if (file == nullptr || (flags & RTLD_NOLOAD) != 0 || !store_ok_ || gpu_tried_.load()) return;
  const char* base = std::strrchr(file, '/');
  base = base != nullptr ? base + 1 : file;
  if (std::strncmp(base, "libcuda.so", 10) != 0 || gpu_tried_.exchange(true)) return;
  // The dlopen wrapper jumps to the real dlopen and never sees it return, and CUPTI must
  // subscribe before the runtime's first call reaches the driver: so sonde opens the driver
  // itself first, with the host's flags, and the host's dlopen then finds it loaded.
  if (dlopen(file, flags) == nullptr) {
    const char* why = dlerror();
    add_note("gpu",
             fmt::format("no CUDA driver: {}; GPU activity is not recorded, the CPU side "
                         "is",
                         why ? why : file),
             root());
    return;
  }
  start_gpu();
}

void Runtime::start_gpu() {
  auto note = [this](const std::string& t, const std::string& m) { add_note(t, m, root()); };
  // An in-process launch names libsonde itself, for the driver to start it (cuda_loaded).
  if (!config_.cuda_injection.empty() &&
      realpath_of(config_.cuda_injection) !=
          object_path_of(reinterpret_cast<const void*>(&Runtime::init))) {
    // The injected tool subscribes and owns the activity buffers first; a second client would
    // take records from it or lose its own (Nsight refuses to share).
    note("gpu", fmt::format("CUDA_INJECTION64_PATH names another tool ({}): sonde leaves CUPTI "
                            "to it; CUDA calls are measured by the preloaded wrappers, GPU "
                            "activity is not recorded",
                            config_.cuda_injection));
    return;
  }
  std::unique_ptr<GpuBackend> backend =
      make_cupti_backend(config_.cupti_library, config_.gpu_metrics, note, window_);
  if (!backend) return;
  // Reachable before it starts: CUPTI may ask for a buffer as soon as activity is enabled.
  gpu_.store(backend.release(), std::memory_order_release);
  if (gpu()->start()) {
    // atexit handlers run in the reverse order of their registration, so the CUDA runtime's
    // (registered later, at its first call) run before this one and destroy its contexts:
    // each context's records were taken in CUPTI's context-destroy callback. This one takes
    // what is left, with a bounded forced flush, before sonde's final flush where that was
    // registered earlier (libcudart opened after start-up).
    std::atexit(gpu_at_exit);
  }
}

void Runtime::drain_gpu() {
  GpuBackend* g = gpu();
  if (g == nullptr || !store_ok_) return;
  AsyncSignalBlock no_signals;
  std::lock_guard lock(store_mu_);
  if (finished_) return;
  // As a flush does: the records' times are converted with the tick ratio, which must be the
  // run's so far, not the first estimate of start (a process whose first flush is this one,
  // 200 ms in, put its kernels a millisecond before its own start).
  clock_.refresh();
  std::vector<GpuRow> rows;
  g->collect(rows, true, clock_);
  g->requeue(std::move(rows));  // written by the final flush, which follows
}

// Under store_mu_. Where the window opened is said in the file (and the process starts
// there); one that never opened is said aloud too, or an empty profile would be a puzzle.
void Runtime::note_window(bool final) {
  if (!window_.requested()) return;
  const WindowSpec& w = window_.spec();
  std::string how = w.steps > 0 ? fmt::format("SONDE_STEPS={}, region '{}'", w.steps, w.step_region)
                                : fmt::format("SONDE_DELAY={:g}", w.delay_s);
  // From the launch's deadline (sonde run), the opening is said from the launch, where the
  // delay counts from: this process may have started later (an exec'd child, a rank).
  bool launched = w.steps == 0 && w.deadline_ns > 0;
  int64_t launch = w.deadline_ns - std::llround(w.delay_s * 1e9);
  if (int64_t opened = window_.opened_mono_ns(); opened != 0) {
    int64_t at = clock_.realtime0() + (opened - clock_.mono0());
    if (process_.started_ns < at) process_.started_ns = at;
    double after_start = double(opened - clock_.mono0()) / 1e9;
    std::string when =
        !launched ? fmt::format("{:.3f} s after the process started", after_start)
        : at > w.deadline_ns
            ? fmt::format(
                  "as the process started, {:.3f} s after the launch: the launch's "
                  "deadline had passed",
                  double(at - launch) / 1e9)
            : fmt::format("{:.3f} s after the launch ({:.3f} s after the process started)",
                          double(at - launch) / 1e9, after_start);
    add_note("window",
             fmt::format("collection began {} ({}); nothing before it is in the "
                         "profile",
                         when, how),
             false);
  } else if (final && process_.rank < 0 && launches_ranks(command_line_args())) {
    // A launcher (torchrun, mpirun) runs no step of its own: its ranks' files hold the windows.
    // "nothing was measured", the first line of `sonde run --steps 5 -- torchrun ...`, read as
    // an empty run where both ranks had measured their steps 6 to 20 (a red-team find).
    add_note("window",
             fmt::format("this process launched ranks and opened no collection window of its "
                         "own ({}): each rank's file holds its own",
                         how),
             false);
  } else if (final) {
    add_note("window",
             w.steps > 0
                 ? fmt::format("the collection window never opened: region '{}' began {} "
                               "times, and the window opens as step {} begins, after "
                               "the {} to skip ({}); nothing was measured",
                               w.step_region, window_.steps_seen(), w.steps + 1, w.steps, how)
                 : fmt::format("the collection window never opened: the process ended "
                               "before the delay ({}); nothing was measured",
                               how),
             // Said by the run's root; a rank's, joining its run quietly, by its launcher
             // (rank_files_said).
             root());
  }
}

void Runtime::add_note(const std::string& topic, const std::string& message, bool print,
                       const char* severity) {
  {
    AsyncSignalBlock no_signals;
    std::lock_guard lock(notes_mu_);
    for (const Note& n : notes_) {
      if (n.topic == topic && n.message == message) return;
    }
    notes_.push_back(Note{severity, topic, message, {}});
  }
  if (print) warn("{}", message);
}

void Runtime::add_note_later(const char* topic, const char* message) {
  for (LaterNote& later : later_notes_) {
    if (later.message.load(std::memory_order_acquire) == message) return;  // kept already
    const char* none = nullptr;
    if (later.topic.compare_exchange_strong(none, topic)) {
      later.message.store(message, std::memory_order_release);
      return;
    }
  }
}

void Runtime::add_counted_note(const std::string& topic, const std::string& message,
                               const std::string& count_of, bool print) {
  {
    AsyncSignalBlock no_signals;
    std::lock_guard lock(notes_mu_);
    for (Note& n : notes_) {
      if (n.topic == topic && n.count_of == count_of) {
        n.message = message;  // the latest count; said on stderr once, the first time
        return;
      }
    }
    notes_.push_back(Note{"warning", topic, message, count_of});
  }
  if (print) warn("{} (so far; the profile keeps the count)", message);
}

void Runtime::register_info_provider(InfoProvider p) {
  std::lock_guard lock(notes_mu_);
  providers_.push_back(p);
}

void Runtime::thread_ended() {
  constexpr uint32_t kBatch = 256;  // ~25 MB of ended threads at most before they are freed
  // Asked once the count reaches the batch, and again after the flush that frees them if it is
  // still there. Rung only as the count passed exactly 256, threads ending while that flush ran
  // left it above, the edge never came again, and ended threads piled up until a periodic flush
  // (never with --flush-interval 0: 4.7 GB for 45,000 threads, a red-team find).
  bool batch = ended_unflushed_.fetch_add(1, std::memory_order_relaxed) + 1 >= kBatch &&
               !ended_flush_asked_.exchange(true, std::memory_order_relaxed);
  bool last = live_threads_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  // A futex wake is a system call. A filtered thread is never the last one while the watched
  // one lives, and once that has ended the flusher looks for the last one anyway.
  if ((batch || last) && !filtered()) flush_request_.ring();
}

void Runtime::main_starts() {
  if (store_ok_) std::atexit(at_exit);  // the one registered at start stays, for dlopen'd sonde
}

void Runtime::loaded_in_process(const std::string& shown) {
  in_process_ = true;
  say_written_ = shown;
  env_say_ = "SONDE_SAY_WRITTEN=" + shown;
  facts_.set("sonde.launch", "in-process");
}

void Runtime::exit_flush() {
  close_exit_gate();
  // In-process, a driver loaded past sonde's dlopen wrapper (a library sonde could not rebind,
  // symbols/rebind.hpp) starts CUPTI only where it calls sonde's injection entry at cuInit
  // (CUDA_INJECTION64_PATH, set by the launcher).
  if (in_process_ && !gpu_tried_.load() && cuda_driver_loaded()) {
    add_note("gpu",
             "the CUDA driver was loaded after sonde was loaded in-process (python3 -m "
             "sonde --in-process) and did not start sonde through CUDA_INJECTION64_PATH: "
             "GPU activity is not recorded; CUDA calls are. Run without --in-process to "
             "record it");
  }
  int64_t from_ns = monotonic_ns();
  bool ok = flush(FlushKind::kExit, "exit");
  log(LogLevel::kDebug, "exit flush: {:.2f} ms", 1e-6 * double(monotonic_ns() - from_ns));
  end_helpers();
  say_where_written(ok);
  note_ranks_of_preloaded_launcher();
}

// A launcher preloaded as it is (LD_PRELOAD=libsonde.so SONDE_OUTPUT=prof.db mpirun ...): no
// `sonde run` or python3 -m sonde outlives it to note what its ranks wrote, and its file read
// as a run of one rank (a red team's `sonde scaling prof.db merged.db` took mpirun's own 0.6 s
// as the one-rank reference: 60.1 % efficiency). It notes them itself, quietly, as a plain
// preload says nothing on stderr.
void Runtime::note_ranks_of_preloaded_launcher() {
  if (!say_written_.empty() || process_id() == 0 || process_.rank >= 0 || filtered()) return;
  try {
    if (!launches_ranks(command_line_args())) return;
    RankFilesSaid ranks = rank_files_said(output_, output_, process_.started_ns);
    if (!ranks.note.empty()) note_rank_files(output_, ranks.note);
  } catch (...) {  // out of memory: the file stays as it was written
  }
}

// After this process's own rows: a helper that does not end costs the wait only.
void Runtime::end_helpers() {
  if (int left = exit_helpers_.end_all(kExitHelpersBudgetMs); left > 0) try {
      log(LogLevel::kDebug, "{} helper process(es) still running after the final flush", left);
    } catch (...) {  // out of memory for the line (say_where_written)
    }
}

void Runtime::say_where_written(bool ok) {
  // Once: an image that python3 -m sonde's program exec'd ends as a preloaded one, whose _exit
  // after the final flush asks the flusher for one more ("..., up to its last periodic flush").
  if (say_written_.empty() || said_written_.exchange(true)) return;
  // Said by the flusher thread at exit, where a std::bad_alloc ended the process of a program at
  // its `ulimit -v` in std::terminate (a red-team find): without memory for the line, its
  // pieces, as they are.
  try {
    say_where_written_line(ok);
  } catch (...) {
    say_on_stderr(ok ? "sonde: profile written to " : "sonde: warning: the final flush of ");
    say_on_stderr(output_);
    say_on_stderr(ok ? "\n" : " did not happen (the process is out of memory)\n");
  }
}

void Runtime::say_where_written_line(bool ok) {
  // As `sonde run` says it once its command has ended (analyzers/programs/launcher.cpp).
  std::string asked = own_output(say_written_, file_named_for_);
  std::string name = absolute(asked) == output_ ? asked : output_;
  // No flush of this process ever written (a full disk from the start): "written ..., up to
  // its last periodic flush" read as a profile with something in it.
  std::string line =
      ok ? fmt::format("sonde: profile written to {}\n", name)
      : process_id() == 0
          ? fmt::format(
                "sonde: warning: the profile could not be written to {} (no flush of this "
                "process was written; see sonde's messages above)\n",
                name)
          : fmt::format(
                "sonde: profile written to {}, up to its last periodic flush (the final "
                "flush did not happen or failed)\n",
                name);
  say_on_stderr(line);
  // Said here, no `sonde run` outlives the program to name what its ranks wrote (python -m sonde
  // -m torch.distributed.run, in-process): this process, the run's launcher, does, as it would,
  // where any flush of its own was written. (Asked at every such exit: fork counts miss
  // CPython's vfork and posix_spawn, which torchrun's subprocess uses.) Out of memory here, the
  // line above stays said once.
  if (process_id() != 0 && process_.rank < 0) try {
      RankFilesSaid ranks = rank_files_said(output_, name, process_.started_ns);
      if (!ranks.line.empty()) {
        say_on_stderr(ranks.line);
        note_rank_files(output_, ranks.note);
      }
    } catch (...) {
    }
}

void Runtime::exit_begins(int status) {
  if (filtered()) {  // no getpid, no wait: the flusher only has to stop its periodic flushes
    exiting_.store(true);
    return;
  }
  if (getpid() != pid()) return;  // getpid: see at_exit (a vfork child shares this memory)
  set_exit_status(status);        // the last told wins: in-process Python's, then libc's exit
  if (exiting_.exchange(true)) return;
  // A periodic flush under way finishes first. Bounded: exit may come from a signal handler
  // that interrupted this very thread inside a flush.
  for (int i = 0; i < 2000; ++i) {
    if (store_mu_.try_lock()) {
      store_mu_.unlock();
      return;
    }
    usleep(1000);
  }
}

// The exit flush runs from C's atexit, after the interpreter's finalization; on CPython 3.10
// a daemon thread woken in take_gil meanwhile touches the freed interpreter, and the longer the
// process lives on the likelier (a red team's four busy daemons: SIGSEGV in 10 of 12 runs under
// a 5.6 ms exit flush, 8 of 12 with a bare 5 ms C atexit sleep and no sonde, 0 of 12 plain).
void Runtime::flush_before_teardown(int status) {
  if (filtered() || getpid() != pid()) return;
  exit_begins(status);
  // Said now where written; where not, the exit flush tries again and says how it went.
  if (flush(FlushKind::kExit, "exit")) say_where_written(true);
}

void Runtime::fork_prepare() {
  forking_.store(true, std::memory_order_release);
  store_mu_.lock();
  notes_mu_.lock();
  facts_.mutex().lock();
  routines_.mutex().lock();
  threads_mu_.lock();
}

void Runtime::fork_parent() {
  threads_mu_.unlock();
  routines_.mutex().unlock();
  facts_.mutex().unlock();
  notes_mu_.unlock();
  store_mu_.unlock();
  forking_.store(false, std::memory_order_release);
}

void Runtime::child_forked() {
  forks_.fetch_add(1, std::memory_order_relaxed);
  // One flush for a burst of forks (a DataLoader's workers, a pool): asked for again only once
  // the flush asked for has read the count. Not on a filtered thread (a futex wake).
  if (!filtered() && !forks_unwritten_.exchange(true)) flush_request_.ring();
}

void Runtime::fork_child() {
  fork_parent();  // this thread took the locks before fork, so it may release them here
  if (filtered()) {
    // The child's one thread carries the filter: no flusher, no file, no flush of its own.
    // Its parent's note says so; the child is not in the profile.
    flusher_running_ = false;
    finished_ = true;
    return;
  }
  uint64_t now = now_ticks();
  pid_t parent = pid();
  pid_ = getpid();
  host_cpu0_.reset();
  // The forking thread is the child's first (its tid the child's pid), a new task whose
  // schedstat counts from the fork: nothing read here, in the fork handler.
  first_thread_runq0_ = 0.0;
  process_.ppid = parent;
  process_.pid = pid();
  process_.origin = "fork";
  process_.parent_process_id = store_.process_id();
  // Another thread's exec or exit under way in the parent is not the child's.
  exit_status_.store(-1, std::memory_order_relaxed);
  exec_flushed_.store(false, std::memory_order_relaxed);
  // Converted at the child's first flush, with the ratio its frames' times take there: taken
  // here, it could fall a few ns after the frames the child carried over from the fork.
  fork_started_ticks_ = now;
  store_.forget_process();
  process_id_.store(0);
  // Only the forking thread exists in the child; the others' states belong to the parent.
  sampler_forget_others(threads_);
  threads_.clear();
  next_seq_ = 0;
  if (t_state != nullptr) {
    t_state->reset_counts(now);
    t_state->renumber(next_seq_++, current_tid());
    // The parent's counter handles count the parent's threads, not this process, and are not
    // this process's to release.
    t_state->counters = 0;
    t_state->counter_backend = nullptr;
    threads_.push_back(t_state);
    // Timers are not inherited: the child samples its thread from a timer of its own.
    sampler_fork_child(*t_state);
  }

  notes_.clear();
  facts_.erase("output.claimed");  // the parent made the file
  say_written_.clear();  // the launching image says where the profile went, not its children
  env_say_.clear();
  if (GpuBackend* gpu = this->gpu()) gpu->fork_child();
  if (store_ok_) reserve_high_descriptors();
  if (counters_) {
    notes_.push_back(Note{"info", "counters", "counters are not recorded in fork children", {}});
  }
  finished_ = false;
  measured_seen_ = false;
  live_threads_ = t_state != nullptr ? 1 : 0;
  forks_ = 0;
  forks_unwritten_ = false;
  ended_unflushed_ = 0;  // the parent's ended threads are not the child's
  ended_flush_asked_ = false;
  pending_signal_ = 0;
  flush_request_.reset();
  // Another thread of the parent may have held it, pausing the flusher for its own fork.
  new (&fork_pause_mu_) std::mutex;
  new (&stop_mu_) std::mutex;
  forks_in_flight_ = 0;
  paused_for_forks_ = false;
  watched_ = this_thread_to_watch();  // the forking thread is the child's only one
  sem_init(&flush_done_, 0, 0);
  start_flusher();
}

}  // namespace sonde
