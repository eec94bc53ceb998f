// The widest vector instructions this CPU and its kernel let a program use: what a library
// built for an older core leaves unused (OpenBLAS's DYNAMIC_ARCH falls back to its SSE3
// "Prescott" kernels on a CPU it does not know: a red team's float64 MLP on an AVX-512 Xeon ran
// its GEMMs 3.5 times slower so, and nothing said it). libsonde records it as run_info
// cpu.vector_isa; `sonde calibrate` measures the GEMM peaks with the kernels of that width.
#pragma once

namespace sonde {

// "avx512" (AVX-512 F), "avx2" (AVX2 with FMA), "avx", "sse"; nullptr off x86-64.
inline const char* vector_isa() {
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
