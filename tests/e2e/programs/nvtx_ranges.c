/* NVTX ranges around BLAS calls, as PyTorch and Megatron mark their phases: push/pop nested,
 * a start/end range by attributes (a wide and an ASCII message), and a pop with nothing open.
 * Prints what the NVTX functions return, which must be the same under sonde. */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <wchar.h>

int nvtxRangePushA(const char* message);
int nvtxRangePushW(const wchar_t* message);
int nvtxRangePop(void);
uint64_t nvtxRangeStartEx(const void* attributes);
void nvtxRangeEnd(uint64_t id);

struct Attributes { /* nvtxEventAttributes_t v2 */
  uint16_t version, size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type, reserved0;
  uint64_t payload;
  int32_t message_type;
  const void* message;
};

int main(void) {
  static float a[64 * 64], c[64 * 64];
  for (int i = 0; i < 64 * 64; ++i) a[i] = 1.0f;
  char step[32];
  for (int s = 0; s < 3; ++s) {
    snprintf(step, sizeof step, "step"); /* a buffer the program reuses */
    int d0 = nvtxRangePushA(step);
    int d1 = nvtxRangePushW(L"forward");
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1, a, 64, a, 64, 0, c, 64);
    int p1 = nvtxRangePop();
    struct Attributes attr = {2, sizeof attr, 0, 0, 0, 0, 0, 0, 1, "backward"};
    uint64_t id = nvtxRangeStartEx(&attr);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1, a, 64, a, 64, 0, c, 64);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1, a, 64, a, 64, 0, c, 64);
    nvtxRangeEnd(id);
    int p0 = nvtxRangePop();
    printf("%d %d %d %d %d\n", d0, d1, p1, p0, id > 0);
  }
  printf("%d %g\n", nvtxRangePop(), c[0]);
  return 0;
}
