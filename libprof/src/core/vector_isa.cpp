#include "core/vector_isa.hpp"

namespace sonde {

const char* vector_isa() {
#if defined(__x86_64__)
  // libgcc's CPU model reads CPUID and, for AVX and AVX-512, XCR0: a kernel or hypervisor that
  // does not save the wider registers leaves the narrower level.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  return "sse";
#else
  return nullptr;
#endif
}

}  // namespace sonde
