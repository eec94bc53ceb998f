/* Stand-in for libnccl.so.2: the collectives sonde wraps succeed and move nothing. As in NCCL,
 * a collective issued between ncclGroupStart and ncclGroupEnd only queues its work, and the
 * outermost ncclGroupEnd launches one kernel per queued collective (groups are per thread). */
#include <cuda_runtime_api.h>
#include <nccl.h>

static __thread int depth, queued;
static void kernel(void) {}

ncclResult_t ncclGroupStart(void) {
  ++depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
  if (depth == 0) return ncclInvalidUsage;
  if (--depth > 0) return ncclSuccess;
  for (; queued > 0; --queued) {
    dim3 one = {1, 1, 1};
    cudaLaunchKernel((const void*)kernel, one, one, NULL, 0, 0);
  }
  return ncclSuccess;
}
#define QUEUE() (queued += depth > 0, ncclSuccess)

#define S const void* sendbuff
#define R void* recvbuff
#define T ncclDataType_t datatype
#define TAIL ncclComm_t comm, cudaStream_t stream
ncclResult_t ncclAllReduce(S, R, size_t n, T, ncclRedOp_t op, TAIL) { return QUEUE(); }
ncclResult_t ncclBroadcast(S, R, size_t n, T, int root, TAIL) { return QUEUE(); }
ncclResult_t ncclReduce(S, R, size_t n, T, ncclRedOp_t op, int root, TAIL) { return QUEUE(); }
ncclResult_t ncclAllGather(S, R, size_t n, T, TAIL) { return QUEUE(); }
ncclResult_t ncclReduceScatter(S, R, size_t n, T, ncclRedOp_t op, TAIL) { return QUEUE(); }
/* As NCCL's own: the in-place broadcast calls ncclBroadcast, through the PLT (so a preloaded
 * ncclBroadcast is what runs). */
ncclResult_t ncclBcast(void* buff, size_t n, T, int root, TAIL) {
  return ncclBroadcast(buff, buff, n, datatype, root, comm, stream);
}
ncclResult_t ncclAlltoAll(S, R, size_t n, T, TAIL) { return QUEUE(); }
ncclResult_t ncclGather(S, R, size_t n, T, int root, TAIL) { return QUEUE(); }
ncclResult_t ncclScatter(S, R, size_t n, T, int root, TAIL) { return QUEUE(); }
ncclResult_t ncclSend(S, size_t n, T, int peer, TAIL) { return QUEUE(); }
ncclResult_t ncclRecv(R, size_t n, T, int peer, TAIL) { return QUEUE(); }
