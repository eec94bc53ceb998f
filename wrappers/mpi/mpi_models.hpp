// What an MPI call moves and on how many ranks, and which of its requests complete: read through
// the profiling interface (PMPI_Type_size, PMPI_Comm_size) of the MPI library the host uses.
// libsonde is not linked against libmpi: the PMPI functions and Open MPI's predefined handles are
// looked up at run time, and the wrappers measure nothing unless that library is Open MPI (whose
// ABI, MPI_Request a pointer, they were compiled for).
#pragma once

// The C API only: Open MPI's C++ bindings would reference libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::mpi {

// The MPI library's state, as far as the models may call it: sizes are asked only between
// MPI_Init and MPI_Finalize (asked outside, Open MPI aborts the host).
bool active();
void initialized();  // MPI_Init or MPI_Init_thread returned
void finalizing();   // MPI_Finalize is about to run
// The host's MPI library is Open MPI (its predefined handles are there): else forward only.
bool abi_ok();

int comm_size(MPI_Comm comm);  // 0: unknown
int comm_rank(MPI_Comm comm);  // -1: unknown
MPI_Comm world();              // MPI_COMM_WORLD as the host sees it
int64_t type_size(MPI_Datatype type);

struct Moved {
  int64_t bytes;
  int comm_size;
};
inline MPI_Comm no_comm() { return nullptr; }

// A communicator size found another way than from a communicator (a window's, a persistent
// request's), for the COMM field of mpi_routines.def.
struct Size {
  int n;
};
inline int comm_size(Size s) { return s.n; }

// Persistent requests (MPI_Send_init, MPI_Recv_init, ...): the process keeps what each moves
// per start and on how many ranks, so MPI_Start and MPI_Startall record the bytes, from
// whichever thread starts it (a request made by the main thread and started by a worker
// recorded 0 bytes and size 0 while the table was per thread). A request the table cannot
// hold starts with 0 bytes, counted (comm_untracked).
int64_t persistent_bytes(int count, const MPI_Request* requests);
Size persistent_size(int count, const MPI_Request* requests);
void persistent_forget(const MPI_Request* request);  // before MPI_Request_free

// Windows (MPI_Win_create, ...): the size of the group each was made on, kept for the process
// (a window is used from any thread); the one-sided calls name only the window.
Size win_size(MPI_Win win);
void win_forget(const MPI_Win* win);  // before MPI_Win_free

// A blocking receive's bytes are what arrived, read from its status after the call
// (PMPI_Get_count), not the buffer it posted: receives are posted for the largest message
// (an MPI_ANY_SOURCE server's buffer, a halo sized for the worst case), and a rank that got
// 821 bytes into an 8 MB buffer read 8 MB and 101 GB/s. `receiving` (the row's bytes) gives
// the posted size and, where the caller passed MPI_STATUS_IGNORE, a status of the thread's own
// in its place so that there is one to read; the caller never reads it.
int64_t receiving(int count, MPI_Datatype type, MPI_Status*& status);
// After the call: what the status of the receive `receiving` saw on this thread says arrived,
// else `posted` (no receive, a failed one, or a count over INT_MAX bytes).
int64_t received_or(int64_t posted, int rc);

inline int64_t bytes(int count, MPI_Datatype type) {
  return count > 0 ? int64_t(count) * type_size(type) : 0;
}
// Per-destination counts (Alltoall) and per-rank blocks (Reduce_scatter_block) times the ranks.
inline int64_t bytes_times_size(int count, MPI_Datatype type, MPI_Comm comm) {
  return bytes(count, type) * comm_size(comm);
}
int64_t bytes_summed(const int counts[], MPI_Datatype type, MPI_Comm comm);
// Gathers: what this rank contributes; with MPI_IN_PLACE its block is the receive one.
inline int64_t sent(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                    MPI_Datatype recvtype) {
  return sendbuf == MPI_IN_PLACE ? bytes(recvcount, recvtype) : bytes(sendcount, sendtype);
}
// Scatters: what this rank receives; with MPI_IN_PLACE (the root) its own block.
inline int64_t received(const void* recvbuf, int recvcount, MPI_Datatype recvtype, int sendcount,
                        MPI_Datatype sendtype) {
  return recvbuf == MPI_IN_PLACE ? bytes(sendcount, sendtype) : bytes(recvcount, recvtype);
}

// The v-variants with MPI_IN_PLACE: this rank's block is its entry of the counts the call
// does read (recvcounts for a gather, sendcounts at a scatter's root); the send arguments
// are ignored by MPI, and were read as 0 bytes.
int64_t sent_v(const void* sendbuf, int sendcount, MPI_Datatype sendtype, const int recvcounts[],
               MPI_Datatype recvtype, MPI_Comm comm);
int64_t received_v(const void* recvbuf, int recvcount, MPI_Datatype recvtype,
                   const int sendcounts[], MPI_Datatype sendtype, MPI_Comm comm);
// All-to-all: what this rank sends, which with MPI_IN_PLACE is what it receives (the receive
// buffer is sent from and received into; the send count and type are ignored).
inline int64_t alltoall_bytes(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                              int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return sendbuf == MPI_IN_PLACE ? bytes_times_size(recvcount, recvtype, comm)
                                 : bytes_times_size(sendcount, sendtype, comm);
}
inline int64_t alltoallv_bytes(const void* sendbuf, const int sendcounts[], MPI_Datatype sendtype,
                               const int recvcounts[], MPI_Datatype recvtype, MPI_Comm comm) {
  return sendbuf == MPI_IN_PLACE ? bytes_summed(recvcounts, recvtype, comm)
                                 : bytes_summed(sendcounts, sendtype, comm);
}

// The requests a call starts or completes, for the in-flight figures of comm_overlap. Each
// thread keeps a small fixed table of the requests it started; a request it cannot hold is
// counted (comm_untracked), never allocated for.
class Track {
 public:
  static Track none() { return Track(kNone); }
  // A probe that may find nothing (MPI_Iprobe, MPI_Improbe): its flag.
  static Track probe(int* flag) {
    Track t(kNone);
    t.flag_ = flag;
    return t;
  }
  static Track start(MPI_Request* request) { return start_all(1, request); }
  static Track start_all(int count, MPI_Request* requests) {
    Track t(kStart);
    t.requests_ = requests;
    t.count_ = count;
    return t;
  }
  // A persistent request made: what each of its starts will move, kept for MPI_Start.
  static Track persist(MPI_Request* request, int64_t bytes, MPI_Comm comm) {
    Track t(kPersist);
    t.requests_ = request;
    t.bytes_ = bytes;
    t.comm_ = comm;
    return t;
  }
  static Track window(MPI_Win* win, MPI_Comm comm) {
    Track t(kWindow);
    t.win_ = win;
    t.comm_ = comm;
    return t;
  }
  // A one-sided operation starts (in flight until the thread's next synchronisation), or a
  // synchronisation completes every one the thread started.
  static Track rma_start() { return Track(kRmaStart); }
  static Track rma_sync() { return Track(kRmaSync); }
  // Every request given completes when the call succeeds (and `flag`, where given, is set).
  static Track all(int count, MPI_Request* requests, int* flag = nullptr) {
    Track t(kAll);
    t.count_ = count;
    t.requests_ = requests;
    t.flag_ = flag;
    return t;
  }
  static Track any(int count, MPI_Request* requests, int* index, int* flag = nullptr) {
    Track t(kAny);
    t.count_ = count;
    t.requests_ = requests;
    t.index_ = index;
    t.flag_ = flag;
    return t;
  }
  static Track some(int count, MPI_Request* requests, int* outcount, int* indices) {
    Track t(kSome);
    t.count_ = count;
    t.requests_ = requests;
    t.index_ = outcount;
    t.indices_ = indices;
    return t;
  }
  // Before the real call: marks the tracked requests among those given (the call may null them).
  void before();
  // After it: how many tracked requests it started and completed.
  void after(ThreadState* thread, int rc, int& started, int& completed);
  // After a set-up call that was not measured: only what it made (a persistent request, a
  // window), for the measured calls that use it.
  void keep(int rc);
  // After the call: it was a poll that found nothing (a test or probe with its flag 0, a
  // Testsome of no request done; Waitsome never returns 0).
  bool found_nothing(int rc) const {
    if (rc != MPI_SUCCESS) return false;
    if (flag_ != nullptr) return *flag_ == 0;
    return kind_ == kSome && index_ != nullptr && *index_ == 0;
  }

 private:
  enum Kind { kNone, kStart, kAll, kAny, kSome, kPersist, kWindow, kRmaStart, kRmaSync };
  explicit Track(Kind k) : kind_(k) {}
  Kind kind_;
  int count_ = 0;
  MPI_Request* requests_ = nullptr;
  int* flag_ = nullptr;
  int* index_ = nullptr;
  int* indices_ = nullptr;
  int64_t bytes_ = 0;
  MPI_Comm comm_ = nullptr;
  MPI_Win* win_ = nullptr;
};

}  // namespace sonde::mpi
