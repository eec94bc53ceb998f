// The runtime singleton: configuration, the threads of this process, process identity, and
// when to flush. Created once by the library constructor and never destroyed, because threads
// and atexit handlers may still call in while the process winds down.
#pragma once

#include <sched.h>
#include <semaphore.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/call_sites.hpp"
#include "core/clock.hpp"
#include "core/cpu_quota.hpp"
#include "core/routine_registry.hpp"
#include "core/thread_state.hpp"
#include "core/window.hpp"
#include "counters/counter_backend.hpp"
#include "gpu/gpu_backend.hpp"
#include "process/exit_helpers.hpp"
#include "runtime/config.hpp"
#include "runtime/doorbell.hpp"
#include "runtime/facts.hpp"
#include "runtime/flush_notes.hpp"
#include "sonde/process_hooks.hpp"
#include "sonde/rank_env.hpp"
#include "store/store.hpp"

namespace sonde {

// The thread runs under a seccomp filter sonde saw installed, by itself or by the thread that
// created it (runtime/sandbox.cpp).
extern constinit thread_local bool t_filtered __attribute__((tls_model("initial-exec")));

enum class FlushKind { kPeriodic, kExplicit, kSignal, kExit, kExec };

class Runtime {
 public:
  static Runtime* get() { return instance_.load(std::memory_order_acquire); }
  static void init();

  // `yield_to_fork`: a thread a library starts (with the sampler on) gives way to a fork in
  // progress instead of waiting for the lock the forking thread holds (see fork_prepare).
  ThreadState* attach_current_thread(bool yield_to_fork = false);
  bool flush(FlushKind kind, const char* end_reason = nullptr);
  // Recorded in the profile; also printed once on stderr when `print` is set.
  // add_run_note_later: static strings, made notes by the next flush (runtime_flush.cpp).
  void add_note_later(const char* topic, const char* message);
  void add_note(const std::string& topic, const std::string& message, bool print = true,
                const char* severity = "warning");
  // A note whose message is a count (246 "calls deeper than" ...): it replaces the note of the
  // topic holding the same words `count_of` (here and in the file: store.hpp's Note::count_of),
  // and is printed the first time only, as a count so far.
  void add_counted_note(const std::string& topic, const std::string& message,
                        const std::string& count_of, bool print);
  void register_info_provider(InfoProvider p);
  Facts& facts() { return facts_; }
  ExitHelpers& exit_helpers() { return exit_helpers_; }
  // Signal handler side: asks the flusher thread to flush and waits a bounded time. `sig` is
  // the signal, or kExitRequest for _exit (which may itself be called from a signal handler).
  void flush_from_signal(int sig);
  static constexpr int kExitRequest = -1;

  // A thread ended: once enough have, wake the flusher so that their states are written and
  // freed instead of waiting for the next period; when it was the last host thread, the flusher
  // ends the process, as glibc would have (sonde's thread must not keep a process alive).
  void thread_ended();

  // main is about to run: the final flush is registered again, to run after the exit handlers
  // that main registers but before the libraries' destructors (glibc's _dl_fini is registered
  // after the library constructors, so it ran before the flush registered at start: OpenBLAS
  // was shut down under threads still calling it while the flush took its time).
  void main_starts();

  // The host's exit has begun (main returned, or exit was called): no periodic flush from here
  // on, so the flusher never runs beside exit handlers that destroy what a flush uses.
  // `status`: as exit was given it, -1 where not known (set_exit_status).
  void exit_begins(int status);
  // The final flush, made before the interpreter's teardown (in_process.hpp's
  // flush_before_teardown); the exit flush then has nothing left to write.
  void flush_before_teardown(int status);
  // An exec whose flush ended this image failed: periodic flushes resume (flush_now).
  void exec_returned() { exec_flushed_.store(false, std::memory_order_relaxed); }
  // The status exit or _exit was given (its low 8 bits, what the parent sees; -1: not told, as
  // quick_exit's), written with the final flush (run_info exit.status): a rank that died of an
  // uncaught exception read as one that finished (a red-team find). Only stored: exit may come
  // from a signal handler.
  void set_exit_status(int status) {
    if (status >= 0) exit_status_.store(status & 0xff, std::memory_order_relaxed);
  }

  // The host is about to change the process's user or group ids (setuid, setresgid, setgroups,
  // ...): sonde's thread is stopped for the call (true when it was), and started again after it,
  // by credentials_changed(), from the calling thread (wrappers/process/credential_wrappers.cpp
  // says why).
  bool credentials_changing();
  void credentials_changed();
  // The host's os.fork on CPython 3.12+ (runtime/python_fork.hpp).
  bool flusher_paused_for_fork();
  void flusher_resumed_after_fork();

  // The calling thread is about to install a seccomp filter (`every_thread`: with
  // SECCOMP_FILTER_FLAG_TSYNC; `program`: the host's struct sock_fprog, unread): true when
  // sonde made ready for it; filter_refused undoes that when the call failed
  // (runtime/sandbox.cpp).
  bool filter_coming(bool every_thread, const void* program);
  void filter_refused(bool every_thread);
  // Whether the calling thread runs under a filter: sonde then makes no system call of its own
  // on it (no flush, no file, no thread), as it cannot know which ones the filter kills for.
  bool filtered() const { return t_filtered || filtered_all_.load(std::memory_order_relaxed); }
  // A filter sonde did not see installed (a raw seccomp system call, or sonde loaded after
  // libc's prctl was bound: `python3 -m sonde --in-process`), asked of the kernel before a
  // flush: true when there is one, said once on stderr.
  bool unseen_filter();

  // CUDA is in use: libcuda.so.1 was loaded at start, or its cuInit called libsonde's
  // InitializeInjection (CUDA_INJECTION64_PATH names libsonde: an in-process launch, whose
  // dlopen sonde does not see), or it is being opened now (`file`, with the host's dlopen
  // `flags`). Starts the GPU backend once; a process without CUDA never does.
  void cuda_loaded();
  void cuda_opening(const char* file, int flags);
  GpuBackend* gpu() const { return gpu_.load(std::memory_order_acquire); }
  // At exit, before the CUDA runtime tears its contexts down: takes CUPTI's last records.
  void drain_gpu();

  // MPI_Init returned: the MPI library's rank and size (the file was chosen from the launcher's
  // environment at start; a disagreement is noted).
  void mpi_rank_known(int rank, int world_size, const char* who);

  // Loaded into a running interpreter by `python3 -m sonde --in-process` (sonde/in_process.hpp):
  // noted in run_info; at exit the profile's name (`shown`) is said after the final flush.
  void loaded_in_process(const std::string& shown);
  // With the sampler on: the process's threads that sonde did not see start (a BLAS pool
  // started by its library's constructor, before sonde's, or in-process inside the dlopen that
  // loads the library, before sonde rebinds it): armed from here, recorded as threads of their
  // own. Threads it knows, and its own flusher, are left alone.
  void sample_other_threads();
  // The final flush at exit (registered with atexit at start and again as main starts).
  void exit_flush();
  // On sonde's thread, once the host's last thread has left by a raw SYS_exit: the final flush,
  // then this thread's own end, which ends the process with the status the kernel keeps.
  [[noreturn]] void end_without_host();

  void fork_prepare();
  void fork_parent();
  void fork_child();
  // In the parent, after a fork: counted (run_info process.forks) and written soon, so that a
  // reader knows of a child that is killed with its parent before its own first flush.
  void child_forked();

  const Config& config() const { return config_; }
  RoutineRegistry& routines() { return routines_; }
  const Clock& clock() const { return clock_; }
  CollectionWindow& window() { return window_; }
  pid_t pid() const { return pid_.load(std::memory_order_relaxed); }
  const std::string& output() const { return output_; }
  const std::string& run_id() const { return run_id_; }
  // The processes row id, once a flush has written it (0 before: children then find their
  // parent by its pid, store.cpp). Read by exec wrappers on the host's threads.
  int64_t process_id() const { return process_id_.load(std::memory_order_acquire); }
  bool finished() const { return finished_.load(); }
  bool recording() const { return store_ok_.load(); }
  bool root() const { return process_.origin == "root"; }
  // The counted events, in column order (empty: counters off).
  std::vector<std::string> counter_events() const;
  // Environment entries handed to exec'd images that lack them ("NAME=value", built at start).
  const std::string& env_preload() const { return env_preload_; }
  const std::string& env_output() const { return env_output_; }
  // SONDE_OUTPUT as this process was given it, where it then wrote elsewhere (a rank's own
  // file): a shell passes its exec'd program that one (main's environment, not the one sonde
  // set), and it is this run's all the same. Empty where they are the same.
  const std::string& env_given_output() const { return env_given_output_; }
  const std::string& env_run() const { return env_run_; }
  // "SONDE_SAY_WRITTEN=name" for this image's own exec where it says where the profile went
  // (python3 -m sonde in-process), else empty.
  const std::string& env_say() const { return env_say_; }

 private:
  // flush's work; flush itself turns a std::bad_alloc into a skipped flush.
  bool flush_now(FlushKind kind, const char* end_reason);
  Runtime() = default;
  void start();
  // start()'s steps, in order.
  void identify_process(const RankEnv& rank, bool root, const std::vector<std::string>& args);
  bool open_output(const RankEnv& rank, bool root);
  void read_peaks(bool root);
  void start_collectors(bool root);
  void start_flusher();
  bool stop_flusher();  // true when it ended (a bounded wait)
  void flusher_loop();
  void drain_samples();  // the sampler's rings into their counts, between two flushes
  void count_unwritten_events(const FlushData& d, const std::string& error);
  void note_window(bool final);  // where the collection window opened, in the notes
  SnapshotLosses snapshot_threads(FlushData& d, uint64_t now, bool final);
  void note_unmeasured(const FlushData& d, bool final);
  void collect_info(FlushData& d, GpuBackend* gpu);  // run_info rows and notes for this flush
  // Threads that had ended before a written flush's snapshot: freed.
  void retire_written_threads(const FlushData& d, bool final, GpuBackend* gpu);
  void hold_until_window(ThreadState& t);  // a new thread state takes the window's state
  std::string choose_output(std::string path, bool claim);
  void start_gpu();
  // After the final flush (ok: it was written) of an in-process launch: where the profile went.
  void say_where_written(bool ok);
  void say_where_written_line(bool ok);
  void note_ranks_of_preloaded_launcher();
  // The helpers named (end_helper_at_exit) ended, once the final flush is written.
  void end_helpers();

  static std::atomic<Runtime*> instance_;

  Config config_;
  std::unique_ptr<TraceBudget> trace_budget_;  // trace mode: all threads' buffers together
  AdaptiveConfig adaptive_;  // SONDE_ADAPTIVE as every new thread takes it (mask 0: off)
  Clock clock_;
  CollectionWindow window_;
  RoutineRegistry routines_;
  std::string output_;
  OutputOrigin output_origin_ = OutputOrigin::kFound;  // kFound: another's, or there already
  int claim_errno_ = 0;  // why a new file could not be made at the name (EROFS, EACCES)
  std::string run_id_;
  std::string env_preload_, env_output_, env_given_output_, env_run_, env_say_;
  std::atomic<pid_t> pid_{0};
  RunInfo run_;
  ProcessInfo process_;
  // The host's busy CPU seconds and the monotonic clock when this process started (none in a
  // fork child, whose parent's reading covers it): each flush says what the host did since.
  std::optional<double> host_cpu0_;
  int64_t host_cpu0_mono_ns_ = 0;
  std::optional<double> first_thread_runq0_;  // thread_runq_wait_s of the first thread at start
  cpu_set_t host_cpus_{};  // the CPUs it may run on, as at its start: those readings' CPUs

  std::mutex threads_mu_;
  // Set while this process's fork handlers hold its locks: between fork_prepare and
  // fork_parent / fork_child.
  std::atomic<bool> forking_{false};
  std::vector<ThreadState*> threads_;
  uint32_t next_seq_ = 0;

  std::mutex store_mu_;           // held for a whole flush; fork waits for it
  std::string last_flush_error_;  // said once until a flush succeeds (under store_mu_)
  // Flushes skipped for want of memory (std::bad_alloc), and whether stderr was told.
  struct LaterNote {
    std::atomic<const char*> topic{nullptr}, message{nullptr};
  };
  LaterNote later_notes_[4];
  std::atomic<uint64_t> flushes_out_of_memory_{0};
  std::atomic<bool> said_out_of_memory_{false};
  std::string trace_loss_error_;      // why a flush's trace events were lost (under store_mu_)
  std::vector<NodeRows> spare_rows_;  // the last snapshots' nodes (under store_mu_)
  Store store_;
  CallSites call_sites_;  // names the shapes' call sites before the store writes them
  std::mutex notes_mu_;
  std::vector<Note> notes_;
  std::vector<InfoProvider> providers_;
  Facts facts_;               // run_info entries set from outside (set_run_fact)
  ExitHelpers exit_helpers_;  // ended after the exit flush (end_helper_at_exit)
  std::unique_ptr<CounterBackend> counters_;
  std::vector<Peak> peaks_;  // from the peaks file, read once at start
  std::atomic<bool> gpu_tried_{false};
  bool in_process_ = false;  // loaded_in_process
  std::atomic<bool> said_written_{false};
  std::string say_written_;  // the name to say at exit ('' : say nothing); the launching image only
  // The rank, or outer task, whose file this process claimed (rank_launcher.hpp's own_output):
  // the closing line names it as the user named the output.
  RankEnv file_named_for_;
  // The cgroup's CPU quota and its throttling counters as the flusher began (cpu_quota.hpp);
  // written once by the flusher, read by flushes after cpu_quota_read_.
  std::optional<CpuQuota> cpu_quota_;
  std::optional<CpuThrottling> throttling0_;
  std::atomic<bool> cpu_quota_read_{false};
  std::atomic<GpuBackend*> gpu_{nullptr};  // never freed: CUPTI may call back until the end

  std::atomic<bool> finished_{false};
  std::atomic<bool> exiting_{false};
  // The exec flush wrote this image's end ("exec"): a periodic flush queued behind it on the
  // flusher thread, before execve replaced the image, wrote the row again without its end
  // (1 run in 10 of an in-process Python that forks and execs read its first image unended).
  std::atomic<bool> exec_flushed_{false};
  std::atomic<int> exit_status_{-1};      // -1: the process has not begun to exit
  std::atomic<int32_t> live_threads_{0};  // host threads attached and not yet ended
  bool measured_seen_ = false;  // a library call or Python frame recorded (under store_mu_)
  std::atomic<bool> store_ok_{false};
  Doorbell flush_request_;
  // The thread that started the runtime (or forked this child): its end wakes the flusher, which
  // then looks for the moment no host thread is left (runtime_flush.cpp).
  WatchedThread watched_;
  sem_t flush_done_;
  std::atomic<int> pending_signal_{0};
  std::atomic<bool> exit_flush_started_{false};  // the flusher took the signal's request
  // The run's other writers' progress, as this process's flushes saw it waiting for the file.
  std::atomic<std::uint32_t> writers_progress_{0};
  // The flusher thread exists: a limit on threads (RLIMIT_NPROC, a cgroup's pids.max) may refuse
  // it, and then nobody would serve a signal's or an _exit's request.
  std::atomic<bool> flusher_running_{false};
  std::atomic<bool> flusher_stop_{false};  // credentials_changing: the flusher is to end
  std::atomic<bool> filtered_all_{false};  // a filter with TSYNC: every thread, sonde's too
  // Every filter sonde saw let its signal handler's calls through (checked before it went in):
  // on a thread under them, sonde may still change a signal's kernel action.
  std::atomic<bool> filters_spare_signals_{true};
  std::atomic<bool> signals_handed_back_now_{false};  // by the filter being installed
  pthread_t flusher_thread_{};
  // The host's threads forking at once (os.fork on CPython 3.12+): the first stops the
  // flusher, the last starts it again. Taken without the GIL, never during the fork itself.
  std::mutex fork_pause_mu_;
  std::mutex stop_mu_;  // stop_flusher's callers, one at a time
  int forks_in_flight_ = 0;
  bool paused_for_forks_ = false;       // the first of them stopped it
  std::atomic<pid_t> flusher_tid_{0};   // its kernel id, to see it leave the thread group
  std::atomic<int64_t> process_id_{0};  // process_id(): the store's, published after a flush
  uint64_t fork_started_ticks_ = 0;     // a fork child's start, for its process row
  std::atomic<uint32_t> ended_unflushed_{0};
  std::atomic<bool> ended_flush_asked_{false};  // thread_ended rang for the ended ones
  std::atomic<uint32_t> forks_{0};              // child_forked: fork children so far
  std::atomic<bool> forks_unwritten_{false};    // ... and a flush is asked to write them
};

}  // namespace sonde
