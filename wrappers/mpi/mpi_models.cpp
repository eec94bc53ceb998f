#include "mpi_models.hpp"

#include <dlfcn.h>

#include <array>
#include <atomic>

#include "core/per_thread.hpp"
#include "symbols/real_symbol.hpp"

namespace sonde::mpi {

namespace {

enum State : int { kUnknown = 0, kActive = 1, kFinalized = 2 };
std::atomic<int> g_state{kUnknown};
std::atomic<int> g_abi{0};  // 0 not looked at, 1 Open MPI, 2 something else

// Looked up once, after the ABI check found Open MPI.
struct Pmpi {
  int (*comm_size)(MPI_Comm, int*) = nullptr;
  int (*type_size)(MPI_Datatype, int*) = nullptr;
  int (*initialized)(int*) = nullptr;
  int (*finalized)(int*) = nullptr;
  const void* comm_null = nullptr;
  const void* datatype_null = nullptr;
  const void* request_null = nullptr;
};
Pmpi g_pmpi;

// An object's address as the host sees it: a program referring to MPI_COMM_WORLD holds a copy
// of ompi_mpi_comm_world (a copy relocation) that libmpi uses too, found first in the global scope;
// RTLD_NEXT would give libmpi's unused original. A libmpi opened RTLD_LOCAL (by a Python module)
// is only found by looking in each loaded object.
const void* find_object(const char* name) {
  if (void* p = dlsym(RTLD_DEFAULT, name)) return p;
  return find_real_symbol(name);
}

template <class F>
void find(F& fn, const char* name) {
  fn = reinterpret_cast<F>(find_real_symbol(name));
}

struct Outstanding {
  MPI_Request handle;
  int pos;  // its index in the array a wait or test is given; -1 none
};
constexpr int kOutstanding = 64;
thread_local PerThread<std::array<Outstanding, kOutstanding>> t_out;
thread_local int t_used __attribute__((tls_model("initial-exec"))) = 0;

bool is_null(MPI_Request r) { return r == nullptr || r == g_pmpi.request_null; }

struct PersistentRequest {
  MPI_Request handle;
  int64_t bytes;
  int size;
};
constexpr int kPersistent = 64;
thread_local PerThread<std::array<PersistentRequest, kPersistent>> t_persistent;
// One-sided operations this thread started since its last synchronisation.
thread_local int t_rma_pending __attribute__((tls_model("initial-exec"))) = 0;

const PersistentRequest* find_persistent(MPI_Request r) {
  if (is_null(r)) return nullptr;
  for (const PersistentRequest& p : t_persistent.get())
    if (p.handle == r) return &p;
  return nullptr;
}

// Windows are few (an application makes a handful); a slot is claimed with one CAS.
constexpr int kWindows = 64;
struct Window {
  std::atomic<MPI_Win> handle{nullptr};
  std::atomic<int> size{0};
};
Window g_windows[kWindows];

Window* find_window(MPI_Win w) {
  if (w == nullptr) return nullptr;
  for (Window& s : g_windows)
    if (s.handle.load(std::memory_order_acquire) == w) return &s;
  return nullptr;
}

int remove_marked(bool (*pick)(int pos, const void* arg), const void* arg) {
  int removed = 0;
  for (int i = 0; i < t_used; ++i) {
    Outstanding& o = t_out.get()[i];
    if (o.handle != nullptr && o.pos >= 0 && pick(o.pos, arg)) {
      o.handle = nullptr;
      ++removed;
    }
    o.pos = -1;
  }
  while (t_used > 0 && t_out.get()[t_used - 1].handle == nullptr) --t_used;
  return removed;
}

}  // namespace

bool abi_ok() {
  int abi = g_abi.load(std::memory_order_acquire);
  if (__builtin_expect(abi != 0, 1)) return abi == 1;
  // Open MPI's predefined communicator: an MPICH or other ABI has int handles the wrappers,
  // compiled for Open MPI's pointers, must not interpret.
  bool ompi = find_object("ompi_mpi_comm_world") != nullptr;
  if (ompi) {
    find(g_pmpi.comm_size, "PMPI_Comm_size");
    find(g_pmpi.type_size, "PMPI_Type_size");
    find(g_pmpi.initialized, "PMPI_Initialized");
    find(g_pmpi.finalized, "PMPI_Finalized");
    g_pmpi.comm_null = find_object("ompi_mpi_comm_null");
    g_pmpi.datatype_null = find_object("ompi_mpi_datatype_null");
    g_pmpi.request_null = find_object("ompi_request_null");
    ompi = g_pmpi.comm_size && g_pmpi.type_size && g_pmpi.initialized && g_pmpi.finalized;
  }
  g_abi.store(ompi ? 1 : 2, std::memory_order_release);
  return ompi;
}

void initialized() { g_state.store(kActive, std::memory_order_release); }
void finalizing() { g_state.store(kFinalized, std::memory_order_release); }

bool active() {
  int s = g_state.load(std::memory_order_acquire);
  if (__builtin_expect(s != kUnknown, 1)) return s == kActive;
  // Initialized without our MPI_Init wrapper (through PMPI_Init, or before sonde was loaded).
  int init = 0, fin = 0;
  if (!abi_ok() || g_pmpi.initialized(&init) != MPI_SUCCESS || !init) return false;
  if (g_pmpi.finalized(&fin) == MPI_SUCCESS && fin) return false;
  initialized();
  return true;
}

MPI_Comm world() {
  return static_cast<MPI_Comm>(const_cast<void*>(find_object("ompi_mpi_comm_world")));
}

int comm_size(MPI_Comm comm) {
  if (comm == nullptr || comm == g_pmpi.comm_null || !active()) return 0;
  int n = 0;
  return g_pmpi.comm_size(comm, &n) == MPI_SUCCESS ? n : 0;
}

int64_t type_size(MPI_Datatype type) {
  if (type == nullptr || type == g_pmpi.datatype_null || !active()) return 0;
  int n = 0;
  return g_pmpi.type_size(type, &n) == MPI_SUCCESS ? n : 0;
}

int64_t bytes_summed(const int counts[], MPI_Datatype type, MPI_Comm comm) {
  int n = comm_size(comm);
  if (counts == nullptr || n <= 0) return 0;
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += counts[i] > 0 ? counts[i] : 0;
  return total * type_size(type);
}

int64_t persistent_bytes(int count, const MPI_Request* requests) {
  int64_t total = 0;
  for (int i = 0; requests != nullptr && i < count; ++i)
    if (const PersistentRequest* p = find_persistent(requests[i])) total += p->bytes;
  return total;
}

Size persistent_size(int count, const MPI_Request* requests) {
  for (int i = 0; requests != nullptr && i < count; ++i)
    if (const PersistentRequest* p = find_persistent(requests[i])) return Size{p->size};
  return Size{0};
}

void persistent_forget(const MPI_Request* request) {
  if (request == nullptr || is_null(*request)) return;
  for (PersistentRequest& p : t_persistent.get())
    if (p.handle == *request) p = PersistentRequest{};
}

Size win_size(MPI_Win win) {
  Window* w = find_window(win);
  return Size{w ? w->size.load(std::memory_order_relaxed) : 0};
}

void win_forget(const MPI_Win* win) {
  if (win == nullptr) return;
  if (Window* w = find_window(*win)) w->handle.store(nullptr, std::memory_order_release);
}

void Track::before() {
  if ((kind_ != kAll && kind_ != kAny && kind_ != kSome) || t_used == 0 || requests_ == nullptr)
    return;
  for (int i = 0; i < count_; ++i) {
    MPI_Request r = requests_[i];
    if (is_null(r)) continue;
    for (int j = 0; j < t_used; ++j) {
      if (t_out.get()[j].handle == r) {
        t_out.get()[j].pos = i;
        break;
      }
    }
  }
}

void Track::keep(int rc) {
  if (kind_ != kPersist && kind_ != kWindow) return;
  int started = 0, completed = 0;
  after(nullptr, rc, started, completed);
}

void Track::after(ThreadState* thread, int rc, int& started, int& completed) {
  started = completed = 0;
  switch (kind_) {
    case kNone:
      return;
    case kStart: {
      if (rc != MPI_SUCCESS || requests_ == nullptr) return;
      for (int r = 0; r < count_; ++r) {
        if (is_null(requests_[r])) continue;
        int i = 0;
        while (i < kOutstanding && i < t_used && t_out.get()[i].handle != nullptr) ++i;
        if (i == kOutstanding) {
          comm_untracked(thread, 1);
          continue;
        }
        t_out.get()[i] = Outstanding{requests_[r], -1};
        if (i >= t_used) t_used = i + 1;
        ++started;
      }
      return;
    }
    case kPersist: {
      if (rc != MPI_SUCCESS || requests_ == nullptr || is_null(*requests_)) return;
      // A handle MPI reuses after a free replaces its old entry; else the first free slot.
      PersistentRequest* slot = nullptr;
      for (PersistentRequest& p : t_persistent.get()) {
        if (p.handle == *requests_) {
          slot = &p;
          break;
        }
        if (slot == nullptr && p.handle == nullptr) slot = &p;
      }
      if (slot == nullptr) {
        if (thread != nullptr) comm_untracked(thread, 1);
        return;
      }
      *slot = PersistentRequest{*requests_, bytes_, comm_size(comm_)};
      return;
    }
    case kWindow: {
      if (rc != MPI_SUCCESS || win_ == nullptr || *win_ == nullptr) return;
      int size = comm_size(comm_);
      if (Window* w = find_window(*win_)) {
        w->size.store(size, std::memory_order_relaxed);
        return;
      }
      for (Window& w : g_windows) {
        MPI_Win empty = nullptr;
        if (w.handle.compare_exchange_strong(empty, *win_, std::memory_order_acq_rel)) {
          w.size.store(size, std::memory_order_relaxed);
          return;
        }
      }
      return;  // more windows than slots: their calls record communicator size 0
    }
    case kRmaStart:
      if (rc == MPI_SUCCESS) {
        ++t_rma_pending;
        started = 1;
      }
      return;
    case kRmaSync:
      if (rc == MPI_SUCCESS) {
        completed = t_rma_pending;
        t_rma_pending = 0;
      }
      return;
    case kAll: {
      bool done = rc == MPI_SUCCESS && (flag_ == nullptr || *flag_);
      completed =
          remove_marked([](int, const void* d) { return *static_cast<const bool*>(d); }, &done);
      return;
    }
    case kAny: {
      int index = rc == MPI_SUCCESS && (flag_ == nullptr || *flag_) && index_ != nullptr
                      ? *index_
                      : MPI_UNDEFINED;
      completed = remove_marked(
          [](int pos, const void* d) { return pos == *static_cast<const int*>(d); }, &index);
      return;
    }
    case kSome: {
      struct Done {
        int n;
        const int* indices;
      } done{rc == MPI_SUCCESS && index_ != nullptr && *index_ != MPI_UNDEFINED ? *index_ : 0,
             indices_};
      completed = remove_marked(
          [](int pos, const void* d) {
            auto* s = static_cast<const Done*>(d);
            for (int k = 0; k < s->n; ++k)
              if (s->indices[k] == pos) return true;
            return false;
          },
          &done);
      return;
    }
  }
}

}  // namespace sonde::mpi
