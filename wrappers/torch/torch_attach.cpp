// Attaching to PyTorch's operator observer (RecordFunction, what torch.profiler uses) through
// libtorch_cpu's exported functions, found in the process at run time: libsonde has no torch
// header and no link against libtorch, so one libsonde serves torch 1.13 and 2.x. The Python
// hook calls these after `import torch` (python_hook/sonde/_frameworks.py), only when sonde
// records. See docs/torch.md.
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "../intercept.hpp"
#include "runtime/log.hpp"
#include "sonde/probe.hpp"
#include "torch_comm.hpp"
#include "torch_names.hpp"
#include "torch_observer.hpp"
#include "torch_shapes.hpp"

namespace {

namespace abi = sonde::torch_abi;
namespace ops = sonde::torch_ops;
using abi::Scope;

std::mutex g_mutex;  // attach and detach, from Python: never on a hot path
abi::RemoveCallback g_remove = nullptr;
abi::CallbackHandle g_handles[3] = {};
bool g_refused = false;  // the reason was noted once; later calls stay quiet

void* find_torch_cpu() {
  void* handle = nullptr;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name == nullptr ||
            std::strstr(info->dlpi_name, "libtorch_cpu.so") == nullptr)
          return 0;
        *static_cast<void**>(out) = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        return 1;
      },
      &handle);
  return handle;
}

int refuse(int code, const char* why) {
  if (!g_refused) {
    g_refused = true;
    sonde::add_run_note("torch", why);
    sonde::log(sonde::LogLevel::kInfo, "{}", why);  // the program's stderr stays its own
  }
  return code;
}

abi::Callback callback(abi::StartCallback start, abi::EndCallback end, Scope scope, bool shapes) {
  abi::Callback cb;
  cb.start = start;
  cb.end = end;
  cb.scopes[int(scope)] = true;
  // Inputs for user scopes: a process group's work event gives its tensors' sizes and dtypes
  // there. Operators' inputs cost about 1 us an operator: only with --record-shapes.
  cb.needs_inputs = scope == Scope::kUserScope || (shapes && scope == Scope::kFunction);
  return cb;
}

constexpr int kObserve = 1;
constexpr int kRecordShapes = 2;

}  // namespace

// 0: attached (or already), -1: no libtorch_cpu in the process, -2: a function sonde needs is
// missing from it. A refusal is noted in the profile (topic `torch`) once. `flags`: kObserve,
// with kRecordShapes for operators' input signatures (`--record-shapes`).
SONDE_EXPORT_C int sonde_torch_observe(int flags) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if ((flags & kObserve) == 0 || g_remove != nullptr) return 0;
  bool shapes = (flags & kRecordShapes) != 0;
  void* lib = find_torch_cpu();
  if (lib == nullptr)
    return refuse(-1, "torch operators not recorded: libtorch_cpu.so is not loaded");
  auto add = reinterpret_cast<abi::AddGlobalCallback>(dlsym(lib, abi::kAddGlobalCallback));
  auto remove = reinterpret_cast<abi::RemoveCallback>(dlsym(lib, abi::kRemoveCallback));
  ops::g_reader.name = reinterpret_cast<abi::Name>(dlsym(lib, abi::kName));
  ops::g_reader.input_sizes = reinterpret_cast<abi::InputSizes>(dlsym(lib, abi::kInputSizes));
  ops::g_reader.input_types = reinterpret_cast<abi::InputTypes>(dlsym(lib, abi::kInputTypes));
  if (add == nullptr || remove == nullptr || ops::g_reader.name == nullptr)
    return refuse(-2,
                  "torch operators not recorded: libtorch_cpu.so lacks "
                  "at::addGlobalCallback, at::removeCallback or RecordFunction::name");
  if (ops::g_reader.input_sizes == nullptr || ops::g_reader.input_types == nullptr) {
    sonde::add_run_note("torch",
                        "torch.distributed bytes not recorded: libtorch_cpu.so lacks "
                        "torch::profiler::impl::inputSizes or inputTypes (new string ABI)");
  }
  if (shapes && ops::g_reader.input_sizes == nullptr) {
    sonde::add_run_note("torch",
                        "operator input shapes not recorded (--record-shapes): "
                        "libtorch_cpu.so lacks torch::profiler::impl::inputSizes");
    shapes = false;
  }
  ops::g_reader.enable_record_function =
      reinterpret_cast<abi::EnableRecordFunction>(dlsym(lib, abi::kEnableRecordFunction));
  ops::g_reader.has_thread_local_callbacks =
      reinterpret_cast<abi::HasCallbacks>(dlsym(lib, abi::kHasThreadLocalCallbacks));
  auto has_global = reinterpret_cast<abi::HasCallbacks>(dlsym(lib, abi::kHasGlobalCallbacks));
  // Another global callback (a C++ extension's observer, Kineto's on-demand tracing) would not
  // see the events of an operator that passes them: none then passes. One added after sonde's
  // is not known here (docs/torch.md).
  ops::g_pass_nested.store(ops::g_reader.enable_record_function != nullptr &&
                               ops::g_reader.has_thread_local_callbacks != nullptr &&
                               has_global != nullptr && !has_global(),
                           std::memory_order_relaxed);
  ops::g_record_shapes.store(shapes, std::memory_order_relaxed);
  ops::g_recording.store(true, std::memory_order_relaxed);
  g_handles[0] = add(callback(&ops::on_start<Scope::kFunction>, &ops::on_end<Scope::kFunction>,
                              Scope::kFunction, shapes));
  g_handles[1] =
      add(callback(&ops::on_start<Scope::kBackwardFunction>, &ops::on_end<Scope::kBackwardFunction>,
                   Scope::kBackwardFunction, shapes));
  g_handles[2] = add(callback(&ops::on_start<Scope::kUserScope>, &ops::on_end<Scope::kUserScope>,
                              Scope::kUserScope, shapes));
  g_remove = remove;
  return 0;
}

// Removes the callbacks (sonde stops recording). Events already started still end through them,
// which then record nothing.
SONDE_EXPORT_C void sonde_torch_unobserve(void) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ops::settle_thread();
  ops::pass_over_untaken();
  struct Tally {
    std::string names;
    uint64_t events = 0;
  } tally;
  ops::unmatched_transfers(
      [](const char* name, uint64_t count, void* ctx) {
        auto& t = *static_cast<Tally*>(ctx);
        t.names += fmt::format("{}{} x {}", t.names.empty() ? "" : ", ", name, count);
        t.events += count;
      },
      &tally);
  if (uint64_t past = ops::calls_past_pending(); past > 0)
    sonde::add_run_note(
        "torch", fmt::format("{} torch.distributed call{} recorded without bytes: more than 1,024 "
                             "calls of one thread waited for their work to start at once",
                             past, past == 1 ? " was" : "s were")
                     .c_str());
  if (uint64_t events = tally.events; events > 0)
    sonde::add_run_note(
        "torch",
        fmt::format("{} process-group work event{} had no torch.distributed call to pair with "
                    "({}): {} bytes are in no comm op. Either the work had no call sonde sees "
                    "(torch 1.13's all_reduce_coalesced and all_to_all_single call the process "
                    "group directly; their time is their Python frames', distributed_c10d.py), "
                    "or its call's thread was still running when the program ended, or its "
                    "call was past the 1,024 one thread keeps waiting",
                    events, events == 1 ? "" : "s", tally.names, events == 1 ? "its" : "their")
            .c_str());
  std::string passing;
  ops::passing_operators(
      [](const char* name, void* ctx) {
        auto& list = *static_cast<std::string*>(ctx);
        list += (list.empty() ? "" : ", ") + std::string(name);
      },
      &passing);
  if (!passing.empty())
    sonde::add_run_note(
        "torch",
        fmt::format("{}: these operators ran the operators they call with RecordFunction "
                    "off (their first calls made {} or more such events each, on average, which "
                    "sonde never records and which cost about 0.1 us each, in the operator's "
                    "own time)",
                    passing, ops::kPassAt)
            .c_str(),
        false);
  if (uint64_t refused = ops::names_refused(); refused > 0)
    sonde::add_run_note("torch", fmt::format("{} operator events were not recorded: their names "
                                             "came after 4,096 distinct ones",
                                             refused)
                                     .c_str());
  if (uint64_t refused = sonde::probe_op_signatures_refused(); refused > 0)
    sonde::add_run_note("torch", fmt::format("{} operator calls' input shapes were not recorded: "
                                             "their signatures came after 65,536 distinct ones",
                                             refused)
                                     .c_str());
  ops::g_recording.store(false, std::memory_order_relaxed);
  if (g_remove == nullptr) return;
  for (abi::CallbackHandle& h : g_handles) {
    if (h != 0) g_remove(h);
    h = 0;
  }
  g_remove = nullptr;
}

// The default process group's size, told when torch.distributed.init_process_group returns.
SONDE_EXPORT_C void sonde_torch_group_size(int size) {
  ops::g_group_size.store(size, std::memory_order_relaxed);
}

// This process's rank in the default group, told with its size: what torch.multiprocessing's
// spawn gives each rank in its arguments, not in the environment (as MPI_Comm_rank is MPI's).
SONDE_EXPORT_C void sonde_torch_rank(int rank, int size) {
  if (rank >= 0 && size > 0) sonde::set_mpi_rank(rank, size, "torch.distributed");
}

namespace {
thread_local sonde::ThreadState* t_setup = nullptr;
thread_local int t_setup_nesting = 0;  // new_group inside a set-up call is part of it
thread_local sonde::CommKind t_setup_kind = sonde::CommKind::kSetup;

void comm_frame_begin(const char* name, sonde::CommKind kind) {
  if (t_setup_nesting++ > 0) return;
  const ops::OpName* op = ops::op_name(name, false);
  if (op == nullptr) return;
  t_setup = sonde::probe_open(op->id, sonde::Nesting::kSuppress);
  if (t_setup == nullptr) return;
  t_setup_kind = kind;
  sonde::comm_call_begin(t_setup, sonde::probe_now());
  sonde::probe_start(t_setup);
}
}  // namespace

// init_process_group and new_group as set-up, like MPI_Init: one frame that holds the
// rendezvous and its waits (nothing beneath it is measured), a `setup` comm op, so the ranks'
// differing waits there are never read as imbalance. `name`: a literal of the Python hook's.
SONDE_EXPORT_C void sonde_torch_setup_begin(const char* name) {
  comm_frame_begin(name, sonde::CommKind::kSetup);
}

// A Work.wait() of the program's own on a nonblocking collective, like MPI_Wait: one frame and
// a `wait` comm op, blocking, so the time a fast rank waits there is communication, not the
// imbalance of the frame that called it. Closed by sonde_torch_setup_end.
SONDE_EXPORT_C void sonde_torch_wait_begin(const char* name) {
  if (t_setup_nesting == 0) ops::poll_thread();
  comm_frame_begin(name, sonde::CommKind::kWait);
}

SONDE_EXPORT_C void sonde_torch_setup_end(void) {
  if (t_setup_nesting > 0 && --t_setup_nesting > 0) return;
  sonde::ThreadState* t = t_setup;
  if (t == nullptr) return;
  t_setup = nullptr;
  sonde::CallCost cost;
  bool wait = t_setup_kind == sonde::CommKind::kWait;
  cost.comm =
      sonde::CommCost{t_setup_kind, true, ops::g_group_size.load(std::memory_order_relaxed)};
  sonde::probe_exit(t, &cost, nullptr);
  sonde::comm_call_end(t, sonde::probe_now(), wait, 0, 0);
  if (wait) ops::poll_thread();  // as sonde_torch_work_waited says
}

// The end of a Work.wait() that torch.distributed's own blocking call (all_reduce, barrier, ...)
// makes inside its frame, which has no frame of its own (c10d_waits counts it). The work waited
// on is done (Work::finish ends its event before it wakes the waiter): it was otherwise in
// flight until the thread's next operator, and a step's numpy or plain Python work between two
// blocking collectives read as overlapped, 94 % in a red team's program where nothing could.
SONDE_EXPORT_C void sonde_torch_work_waited(void) {
  if (t_setup_nesting == 0) ops::poll_thread();
}

// A note of topic `torch` from the Python hook (a torch version it does not attach to).
SONDE_EXPORT_C void sonde_torch_note(const char* message) { sonde::add_run_note("torch", message); }
