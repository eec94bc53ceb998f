/* A stand-in for NVTX v2's libnvToolsExt (not installed here): the range functions with NVTX's
 * return values (push/pop: the depth before, -1 when there is nothing to pop; start: a new id),
 * so a program linked against it calls through the dynamic linker as it would the real one. */
#include <stdint.h>
#include <wchar.h>

static __thread int depth;
static uint64_t next_id = 1;

int nvtxRangePushA(const char* message) {
  (void)message;
  return depth++;
}
int nvtxRangePushW(const wchar_t* message) {
  (void)message;
  return depth++;
}
int nvtxRangePushEx(const void* attributes) {
  (void)attributes;
  return depth++;
}
int nvtxRangePop(void) { return depth > 0 ? --depth : -1; }
uint64_t nvtxRangeStartA(const char* message) {
  (void)message;
  return __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
}
uint64_t nvtxRangeStartEx(const void* attributes) {
  (void)attributes;
  return __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
}
void nvtxRangeEnd(uint64_t id) { (void)id; }
