/* NVTX 3 ranges (header-only, as PyTorch, cuDNN and NCCL compile them in) around BLAS calls:
 * push/pop nested, a start/end range by attributes, a domain's push with a registered string,
 * and a pop with nothing open. Prints what push and pop return, which must be the same under
 * sonde (NVTX without a tool answers -2, NVTX_NO_PUSH_POP_TRACKING). */
#include <cblas.h>
#include <stdio.h>

#include "nvtx3/nvToolsExt.h"

static float a[64 * 64], c[64 * 64];

static void gemm(void) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1, a, 64, a, 64, 0, c, 64);
}

int main(void) {
  for (int i = 0; i < 64 * 64; ++i) a[i] = 1.0f;
  nvtxDomainHandle_t domain = nvtxDomainCreateA("trainer");
  nvtxStringHandle_t update = nvtxDomainRegisterStringA(domain, "update");
  for (int s = 0; s < 3; ++s) {
    int d0 = nvtxRangePushA("step");
    int d1 = nvtxRangePushA("forward");
    gemm();
    int p1 = nvtxRangePop();
    nvtxEventAttributes_t attr = {0};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = "backward";
    nvtxRangeId_t id = nvtxRangeStartEx(&attr);
    gemm();
    gemm();
    nvtxRangeEnd(id);
    nvtxEventAttributes_t named = {0};
    named.version = NVTX_VERSION;
    named.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    named.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    named.message.registered = update;
    nvtxDomainRangePushEx(domain, &named);
    gemm();
    nvtxDomainRangePop(domain);
    int p0 = nvtxRangePop();
    printf("%d %d %d %d\n", d0, d1, p1, p0);
  }
  printf("%d %g\n", nvtxRangePop(), c[0]);
  return 0;
}
