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
  int (*comm_rank)(MPI_Comm, int*) = nullptr;
  int (*type_size)(MPI_Datatype, int*) = nullptr;
  int (*initialized)(int*) = nullptr;
  int (*finalized)(int*) = nullptr;
  int (*get_count)(const MPI_Status*, MPI_Datatype, int*) = nullptr;
  MPI_Datatype byte = nullptr;
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

// A slot is claimed with one CAS and its handle published after its figures, so a thread
// finding the handle reads them whole.
struct PersistentRequest {
  std::atomic<MPI_Request> handle{nullptr};
  std::atomic<bool> claimed{false};
  std::atomic<int64_t> bytes{0};
  std::atomic<int> size{0};
};
constexpr int kPersistent = 256;
PersistentRequest g_persistent[kPersistent];
// One-sided operations this thread started since its last synchronisation.
thread_local int t_rma_pending __attribute__((tls_model("initial-exec"))) = 0;

PersistentRequest* find_persistent(MPI_Request r) {
  if (is_null(r)) return nullptr;
  for (PersistentRequest& p : g_persistent)
    if (p.handle.load(std::memory_order_acquire) == r) return &p;
  return nullptr;
}

thread_local MPI_Status t_own_status;
thread_local MPI_Status* t_receiving __attribute__((tls_model("initial-exec"))) = nullptr;

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
    find(g_pmpi.comm_rank, "PMPI_Comm_rank");
    find(g_pmpi.type_size, "PMPI_Type_size");
    find(g_pmpi.initialized, "PMPI_Initialized");
    find(g_pmpi.finalized, "PMPI_Finalized");
    find(g_pmpi.get_count, "PMPI_Get_count");
    g_pmpi.byte = static_cast<MPI_Datatype>(const_cast<void*>(find_object("ompi_mpi_byte")));
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

int comm_rank(MPI_Comm comm) {
  if (comm == nullptr || comm == g_pmpi.comm_null || !active() || g_pmpi.comm_rank == nullptr)
    return -1;
  int r = -1;
  return g_pmpi.comm_rank(comm, &r) == MPI_SUCCESS ? r : -1;
}

int64_t sent_v(const void* sendbuf, int sendcount, MPI_Datatype sendtype, const int recvcounts[],
               MPI_Datatype recvtype, MPI_Comm comm) {
  if (sendbuf != MPI_IN_PLACE) return bytes(sendcount, sendtype);
  int r = comm_rank(comm);
  return recvcounts != nullptr && r >= 0 ? bytes(recvcounts[r], recvtype) : 0;
}

int64_t received_v(const void* recvbuf, int recvcount, MPI_Datatype recvtype,
                   const int sendcounts[], MPI_Datatype sendtype, MPI_Comm comm) {
  if (recvbuf != MPI_IN_PLACE) return bytes(recvcount, recvtype);
  int r = comm_rank(comm);
  return sendcounts != nullptr && r >= 0 ? bytes(sendcounts[r], sendtype) : 0;
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

int64_t receiving(int count, MPI_Datatype type, MPI_Status*& status) {
  if (status == MPI_STATUS_IGNORE) status = &t_own_status;
  t_receiving = status;
  return bytes(count, type);
}

int64_t received_or(int64_t posted, int rc) {
  MPI_Status* status = t_receiving;
  if (__builtin_expect(status == nullptr, 1)) return posted;
  t_receiving = nullptr;
  int n = 0;
  if (rc != MPI_SUCCESS || g_pmpi.get_count == nullptr || g_pmpi.byte == nullptr ||
      g_pmpi.get_count(status, g_pmpi.byte, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0)
    return posted;
  return n;
}

int64_t persistent_bytes(int count, const MPI_Request* requests) {
  int64_t total = 0;
  for (int i = 0; requests != nullptr && i < count; ++i)
    if (const PersistentRequest* p = find_persistent(requests[i]))
      total += p->bytes.load(std::memory_order_relaxed);
  return total;
}

Size persistent_size(int count, const MPI_Request* requests) {
  for (int i = 0; requests != nullptr && i < count; ++i)
    if (const PersistentRequest* p = find_persistent(requests[i]))
      return Size{p->size.load(std::memory_order_relaxed)};
  return Size{0};
}

void persistent_forget(const MPI_Request* request) {
  if (request == nullptr || is_null(*request)) return;
  if (PersistentRequest* p = find_persistent(*request)) {
    p->handle.store(nullptr, std::memory_order_release);
    p->claimed.store(false, std::memory_order_release);
  }
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
      int size = comm_size(comm_);
      // A handle MPI reuses after a free replaces its old entry; else the first free slot.
      if (PersistentRequest* p = find_persistent(*requests_)) {
        p->bytes.store(bytes_, std::memory_order_relaxed);
        p->size.store(size, std::memory_order_relaxed);
        return;
      }
      for (PersistentRequest& p : g_persistent) {
        bool free = false;
        if (!p.claimed.compare_exchange_strong(free, true, std::memory_order_acq_rel)) continue;
        p.bytes.store(bytes_, std::memory_order_relaxed);
        p.size.store(size, std::memory_order_relaxed);
        p.handle.store(*requests_, std::memory_order_release);
        return;
      }
      if (thread != nullptr) comm_untracked(thread, 1);
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
