// Expands mpi_routines.def into the interposed MPI functions, each calling PMPI_<name>. libsonde
// is not linked against libmpi: a program without MPI never calls these, and one with MPI has
// every PMPI function looked up at its first call (docs/distributed.md).
#include <errno.h>

#include <array>
#include <cstddef>

#include "../intercept.hpp"
#include "mpi_models.hpp"  // first: mpi.h without its C++ bindings

namespace {

namespace mpi = sonde::mpi;

// The real function of MPI_X is PMPI_X: the profiling interface every MPI library provides.
#define SONDE_TABLE "mpi/mpi_routines.def"  // relative to wrapper_table.inc
#define SONDE_TABLE_REAL_PREFIX "P"
#define SONDE_TABLE_CONSTRUCTOR register_mpi
#define SONDE_MPI(NAME, ...) SONDE_TABLE_ROW(NAME, {#NAME, sonde::kinds::kMpi, "mpi"})
#include "../wrapper_table.inc"
#undef SONDE_MPI
#undef SONDE_TABLE_CONSTRUCTOR
#undef SONDE_TABLE

// MPI_Init's and MPI_Finalize's own part: the library's state for the models, and the rank MPI
// itself gives (the file was named from the launcher's environment before main).
void setup_before(Entry e) {
  if (e == Entry::MPI_Finalize) mpi::finalizing();
}

void setup_after(Entry e, int rc) {
  if (rc != MPI_SUCCESS || (e != Entry::MPI_Init && e != Entry::MPI_Init_thread)) return;
  mpi::initialized();
  int rank = -1, size = -1;
  using Fn = int (*)(MPI_Comm, int*);
  auto comm_rank = reinterpret_cast<Fn>(sonde::find_real_symbol("PMPI_Comm_rank"));
  auto comm_size = reinterpret_cast<Fn>(sonde::find_real_symbol("PMPI_Comm_size"));
  MPI_Comm world = mpi::world();
  if (comm_rank && comm_size && world && comm_rank(world, &rank) == MPI_SUCCESS &&
      comm_size(world, &size) == MPI_SUCCESS) {
    sonde::set_mpi_rank(rank, size);
  }
}

// One measured MPI call: the model (bytes, communicator size) and the request bookkeeping run
// outside the timed window; `real` is the PMPI call with the host's arguments. `cfa` and `sp`:
// the wrapper's caller's stack address and its own stack pointer, so that a call a signal
// handler's siglongjmp left is found by the next one (core/left_frames.hpp), as BLAS calls are.
template <class Model, class Real>
int measure(Entry e, sonde::CommKind kind, bool blocking, Model&& model, mpi::Track track,
            Real&& real, uintptr_t cfa, uintptr_t sp) {
  if (__builtin_expect(sonde::exit_gate_closed(), 0)) sonde::wait_at_exit_gate();
  if (!mpi::abi_ok()) return real();
  bool setup = kind == sonde::CommKind::kSetup;
  if (setup) setup_before(e);
  sonde::ThreadState* t =
      sonde::inline_probe::open(g_ids[size_t(e)], sonde::Nesting::kSuppress, cfa, sp);
  if (t == nullptr) {
    // Not measured (before the collection window, or nested), yet what a set-up call makes or
    // frees (a persistent request, an RMA window) is kept: the calls measured later use it.
    int saved = errno;
    if (setup) model();
    errno = saved;
    int rc = real();
    saved = errno;
    if (setup) {
      setup_after(e, rc);
      track.keep(rc);
    }
    errno = saved;
    return rc;
  }
  int saved = errno;
  sonde::CallCost cost;
  mpi::Moved moved = model();
  cost.bytes = uint64_t(moved.bytes);
  cost.comm = sonde::CommCost{kind, blocking, moved.comm_size};
  track.before();
  errno = saved;
  sonde::comm_call_begin(t, sonde::probe_now());
  sonde::comm_call_pending(t, cost.comm, cost.bytes, blocking && !setup);
  sonde::probe_start(t);
  int rc = real();
  saved = errno;
  cost.bytes = uint64_t(mpi::received_or(int64_t(cost.bytes), rc));
  sonde::probe_exit(t, &cost, nullptr);
  int started = 0, completed = 0;
  track.after(t, rc, started, completed);
  sonde::comm_call_end(t, sonde::probe_now(), blocking && !setup, started, completed);
  if (track.found_nothing(rc)) sonde::comm_call_polled(t);
  if (setup) setup_after(e, rc);
  errno = saved;
  return rc;
}

}  // namespace

// measure's `cfa` and `sp`, read in the wrapper itself, whether measure is inlined or not.
#define SONDE_MPI_CALLER \
  reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()), ::sonde::inline_probe::stack_pointer()
#define SONDE_MPI(NAME, KIND, BLOCKING, PARAMS, ARGS, BYTES, COMM, TRACK) \
  SONDE_EXPORT_C int NAME PARAMS {                                        \
    using Fn = int(*) PARAMS;                                             \
    Fn real = reinterpret_cast<Fn>(g_real[size_t(Entry::NAME)].get());    \
    return measure(                                                       \
        Entry::NAME, KIND, BLOCKING != 0,                                 \
        [&]() {                                                           \
          return mpi::Moved{int64_t(BYTES), mpi::comm_size(COMM)};        \
        },                                                                \
        TRACK, [&]() { return real ARGS; }, SONDE_MPI_CALLER);            \
  }
#include "mpi_routines.def"
#undef SONDE_MPI
#undef SONDE_MPI_CALLER
