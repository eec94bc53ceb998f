// The API that wrappers and the Python hook use to record calls. libprof knows nothing about
// BLAS or CUDA: a caller describes a routine once (register_routine) and, per call, hands over
// the cost its model computed.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

// Exported from libsonde.so for the modules that live outside it (the Python extension).
#define SONDE_API __attribute__((visibility("default")))

namespace sonde {

using RoutineId = uint32_t;

// Values are stored by name (store.cpp); new types are appended so existing values keep theirs.
enum class DType : uint8_t { kNone = 0, kF32, kF64, kC64, kC128, kF16, kBF16 };

struct RoutineSpec {
  const char* name;
  const char* kind;     // 'region', 'blas', 'python', 'cuda', ...
  const char* library;  // '' when none
  const char* file = "";
  int line = 0;
  // Facts the wrapper's table states (routines.dtype and role, docs/schema.md); they do not
  // identify the routine. dtype: the element type of a routine made for one (cblas_sgemm);
  // role: what a CUDA API call does for the program ('launch', 'copy', 'sync', 'other').
  DType dtype = DType::kNone;
  const char* role = "";
};

// What happens to interposed calls made while this routine runs. kSuppress: they go straight to
// the real function and are not measured (cblas_sgemm reaching sgemm_ inside the BLAS is one
// call). kChildren: they are measured as children (Python frames, operators). kRegion: as
// kChildren, for a region (sonde.region, record_function, NVTX), which a Python frame returning
// with it still open closes (probe_exit_frame).
enum class Nesting : uint8_t { kChildren = 0, kSuppress = 1, kRegion = 2 };

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  char trans_a = 'N', trans_b = 'N';
  DType dtype = DType::kNone;  // kNone: the call has no shape worth recording
  // Threads the library ran the call with, as it says (OpenBLAS, MKL, BLIS, OpenMP); 0:
  // unknown. % of peak compares with the peak for this count (docs/metrics.md).
  uint16_t threads = 0;
};

// A communication call (MPI, NCCL): recorded per call path, communicator size and message size
// (the comm_ops table), the bytes being CallCost::bytes. Values are stored by name (store.cpp).
// kRma: a one-sided operation (MPI_Put, MPI_Get, ...), which completes at the window's next
// synchronisation (a kWait call).
enum class CommKind : uint8_t { kNone = 0, kP2P, kCollective, kWait, kSetup, kRma };

struct CommCost {
  CommKind kind = CommKind::kNone;  // kNone: not a communication call
  bool blocking = true;             // false: the start of a nonblocking operation
  int32_t comm_size = 0;
};

struct CallCost {
  uint64_t flops = 0;
  uint64_t bytes = 0;
  GemmShape shape;
  CommCost comm;
};

class ThreadState;

// Registers (or finds) a routine; thread-safe, not for the hot path. Returns the same id for
// the same description.
SONDE_API RoutineId register_routine(const RoutineSpec& spec);

// Held around many register_routine calls (a wrapper's constructor): signals are blocked once
// for all of them, not twice a routine (277 routines in every process's start, 2 us a pair).
class SONDE_API RoutineBatch {
 public:
  RoutineBatch();
  ~RoutineBatch();
  RoutineBatch(const RoutineBatch&) = delete;
  RoutineBatch& operator=(const RoutineBatch&) = delete;

 private:
  void* block_;  // the core's AsyncSignalBlock
};

// Hot path. Returns nullptr when the call must not be measured (sonde not ready, a kSuppress
// routine is running on this thread, sonde's own code, or the depth limit); the caller then
// forwards without calling probe_exit.
SONDE_API ThreadState* probe_enter(RoutineId routine, Nesting nesting);

// probe_enter in two steps, for callers with work to do between deciding to measure a call
// and starting its clock (a wrapper's cost model): probe_open returns what probe_enter would,
// without starting the clock; probe_start must follow when it returned a thread.
SONDE_API ThreadState* probe_open(RoutineId routine, Nesting nesting);
SONDE_API void probe_start(ThreadState* thread);
// Like probe_enter for a frame that is re-entered rather than called (a generator or coroutine
// resuming): time accrues to the same call path, the call count does not grow.
SONDE_API ThreadState* probe_resume(RoutineId routine, Nesting nesting);

// A thread that runs several call stacks by turns (greenlets: one C stack swapped for another
// inside the thread) keeps one stack of sonde frames per call stack, set aside at each switch.
// probe_suspend_stack closes every open frame of the calling thread at one instant, as a yield
// closes a generator's (time charged, no call counted), and writes them into `out`, outermost
// first; with more than `cap` open it closes nothing. It returns how many were open, and in
// `owner` the thread state they belong to (nullptr: the thread records nothing).
// probe_resume_stack re-opens such frames, as resumed generators, on top of this thread's stack
// when `owner` is this thread's state, without the refusals of probe_enter: each frame will be
// closed by the probe_exit its hook still owes it.
struct SuspendedFrame {
  uint32_t node = 0;  // a reference to it (as probe_current_node's): none in a fork child
  Nesting nesting = Nesting::kChildren;
};
SONDE_API uint32_t probe_suspend_stack(SuspendedFrame* out, uint32_t cap, const void** owner);
SONDE_API void probe_resume_stack(const void* owner, const SuspendedFrame* frames, uint32_t n);

// A call at this thread's top level that began when the thread did (or when the collection
// window opened) and ends now: the interpreter's start-up, which ran before the hook that
// records Python frames was there, named instead of left in the thread's root. Nothing when a
// frame is open on the thread or the call must not be measured.
SONDE_API void probe_since_thread_start(RoutineId routine);
// A call at this thread's top level that begins now and is never closed: the interpreter's
// teardown, which the final flush charges up to its own instant (as any frame still open).
// Nothing when a frame is open on the thread or the call must not be measured.
SONDE_API void probe_open_until_exit(RoutineId routine);

// Closes the innermost frame opened by probe_enter on this thread. `call_site` is the caller's
// return address, used to tell call sites apart for shapes (nullptr: none).
SONDE_API void probe_exit(ThreadState* thread, const CallCost* cost, const void* call_site);
// probe_exit for a frame of the Python hook: the regions opened inside it and still open close
// first (a range entered in a function that returns, torch.profiler's prof.step(), a `with`
// around a generator's yield or in a @contextmanager), so that the frame closes its own entry
// and not the region's; each region's own end, later, finds it closed and is no mismatch.
SONDE_API void probe_exit_frame(ThreadState* thread);
// Takes back the innermost frame probe_enter opened, for a call that never ran (CPython refused
// a Python frame at its recursion check, before its first instruction): its count and its
// caller's subrs are undone and nothing is charged to it, in place of probe_exit.
SONDE_API void probe_cancel(ThreadState* thread);

// The exit gate. When the final flush at exit begins, every thread but the exiting one is held
// at the entry of an intercepted library call (for at most a few seconds), so a detached thread
// still calling the BLAS does not run into a library that the exit is about to tear down (its
// destructors run after the flush): without sonde it would mostly have been ended by then.
// One relaxed load on the hot path; wait_at_exit_gate is the slow path.
extern std::atomic<bool> g_exit_gate_closed;
void close_exit_gate();
void wait_at_exit_gate();
inline bool exit_gate_closed() { return g_exit_gate_closed.load(std::memory_order_relaxed); }
// Exposed and overlapped communication (comm_overlap): a communication wrapper says when its call
// begins and ends on this thread (`now` from probe_now), whether its time is exposed (a blocking
// call or a wait), and how many nonblocking operations the call started and completed. Owner
// thread only; no lock.
SONDE_API void comm_call_begin(ThreadState* thread, uint64_t now);
SONDE_API void comm_call_end(ThreadState* thread, uint64_t now, bool exposed, int started,
                             int completed);
// Operations this thread started that completed at `now` outside any call of its own (torch's
// backend work, seen at its next operator): the clock's in-flight count only. comm_call_end
// would end the call the thread may be in (a Work.wait, a set-up call), whose exposed time was
// then lost.
SONDE_API void comm_completed(ThreadState* thread, uint64_t now, int completed);
// The call that just ended (comm_call_end) was a poll that found nothing (MPI_Test with its
// flag 0, MPI_Iprobe finding no message): where the thread's next communication call begins
// within kSpinGapTicks of it, the loop between them was waiting too, exposed, not computation
// overlapping what is in flight.
SONDE_API void comm_call_polled(ThreadState* thread);
// About 1-2.5 us at a TSC of 2-5 GHz (5 us on CLOCK_MONOTONIC's ns): a Python loop
// `while not req.Test()` spends 0.1-0.5 us between its polls. A program that drives progress
// with a poll between pieces of work makes its pieces longer than this: at 50,000 ticks a
// review's loop of 5 us pieces read 0.348 s of its computation exposed.
inline constexpr uint64_t kSpinGapTicks = 5000;
// A longer gap is waiting too where the thread's CPU time grew by no more than a spin's in it
// (the loop's body, the poll's return, the two reads of the clock, a system call each: about
// 1-3 us for a Python loop here): it was off its core or asleep between the polls, not
// computing (comm_call_begin). A review's pieces of 5 us of work between polls stay computation.
inline constexpr int64_t kSpinGapCpuNs = 4000;
// What the call comm_call_begin opened will record (its comm_ops row) and whether its time is
// exposed: said between the two, so that a call still open at the process's last flush (a rank
// killed in a hung MPI_Allreduce, or by another rank's MPI_Abort) is recorded as far as it ran.
SONDE_API void comm_call_pending(ThreadState* thread, const CommCost& comm, uint64_t bytes,
                                 bool exposed);
// A communication call whose bytes are known only after its frame closed (torch.distributed over
// gloo: the caller enqueues the work, and the tensors' sizes and dtypes are seen when gloo's
// thread starts it). probe_current_node gives a reference to the innermost open frame's node
// (call it between probe_start and probe_exit), valid in this thread's call tree: a fork child
// has a tree of its own, where one taken before the fork refers to nothing. comm_record_late, on
// the same thread later, records the call in comm_ops for that node and adds its bytes, as
// probe_exit with a CommCost would have (nothing for a reference from before a fork).
SONDE_API uint32_t probe_current_node(ThreadState* thread);
SONDE_API void comm_record_late(ThreadState* thread, uint32_t node, const CommCost& comm,
                                uint64_t bytes, uint64_t ticks);
// `--record-shapes`: the id of an operator's input signature (0 once the process's table is
// full), and one call of the operator on `node` (probe_current_node) with that signature taking
// `ticks`, recorded on this thread for op_shapes. Not for the default hot path: interning locks.
SONDE_API uint32_t probe_op_signature(std::string_view shapes, std::string_view dtypes);
SONDE_API void probe_op_shape(ThreadState* thread, uint32_t node, uint32_t signature,
                              uint64_t ticks);
// Signatures not recorded because the table was full.
SONDE_API uint64_t probe_op_signatures_refused();
// Requests a wrapper could not track (its table of outstanding requests was full): counted and
// noted, their time then missing from the in-flight figures.
SONDE_API void comm_untracked(ThreadState* thread, uint64_t requests);

// The MPI library's own rank and size, told once MPI_Init returns (docs/distributed.md); or
// another communication library's (`who`: "torch.distributed", once init_process_group returns).
SONDE_API void set_mpi_rank(int rank, int world_size, const char* who = "MPI");

// A fork without sonde's thread in the process (CPython 3.12+ warns at os.fork in a process
// of more than one thread, counting native ones: the flusher made every forking program warn):
// wraps posix.fork and posix.forkpty so that the flusher is ended for the call and started
// again in the parent after it (runtime/python_fork.hpp). With the GIL held, in an initialized
// interpreter; once per process (a preloaded libsonde has done it as the program started).
// False where a wrapper could not be put in place; the program then forks as before.
SONDE_API bool guard_python_fork();

// sonde's clock, for callers that time pieces of a frame themselves (source lines).
SONDE_API uint64_t probe_now();

// The calling thread's innermost Python frame, as an address to compare and never to read
// (nullptr: none, or no Python hook loaded): the Python hook says how to find it, whether or not
// it records frames (--paused), and the torch observer asks, to tell an operator that Python
// code called inside another event from one that event's C++ called (torch_observer.cpp).
using InterpreterFrameFn = const void* (*)();
SONDE_API void set_interpreter_frame_fn(InterpreterFrameFn fn);
SONDE_API const void* interpreter_frame();

// Time sonde spent on the calling thread inside the program's open frames (the Python hook
// parsing a source file for --lines: 122 ms on a 12,000-line file's first timed call): taken
// off every open frame, whose starts move `ticks` later, so that it is the thread's own time
// (its root's), not a function's. Not for the hot path.
SONDE_API void exclude_from_open_frames(uint64_t ticks);

// Charges `ticks` and `hits` (1, or 0 where a statement over several lines goes on) to `line`
// of `routine` on the calling thread (line costs).
SONDE_API void record_line(RoutineId routine, int line, uint64_t ticks, uint32_t hits);

// A fact about this process for run_info (`torch.num_threads` from the Python hook), written
// from the next flush on; a later value of the same key replaces it. Not for the hot path.
SONDE_API void set_run_fact(const char* key, const char* value);

// A note of `topic` for the profile (one per distinct message), as libsonde's own wrappers add
// them: the Python hook's subnormal arguments (a warning), the launcher's re-exec (information,
// `warning` false). Not for the hot path.
SONDE_API void add_run_note(const char* topic, const char* message, bool warning = true);
// The same, allocating nothing now: `topic` and `message` are static strings (literals), kept as
// pointers and made a note (a warning) at the next flush that has memory for it. For a caller
// out of memory (the Python hook's, python_hook/src/out_of_memory.hpp). Four at most.
SONDE_API void add_run_note_later(const char* topic, const char* message);

// A helper process of this one (multiprocessing's resource tracker or forkserver) that ends when
// `fd`, this process's end of its pipe, is closed: closed after the exit flush, and the helper
// waited for a moment, so that its own final flush is in the file when the command returns
// (process/exit_helpers.hpp). Named at the interpreter's last atexit call. Not for the hot path.
SONDE_API void end_helper_at_exit(int fd, int pid);

}  // namespace sonde
