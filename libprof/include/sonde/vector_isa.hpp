// The widest vector instructions this CPU and its kernel let a program use: what a library
// built for an older core leaves unused (OpenBLAS's DYNAMIC_ARCH falls back to its SSE3
// "Prescott" kernels on a CPU it does not know: a red team's float64 MLP on an AVX-512 Xeon ran
// its GEMMs 3.5 times slower so, and nothing said it). libsonde records it as run_info
// cpu.vector_isa; `sonde calibrate` measures the GEMM peaks with the kernels of that width.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

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

// The bfloat16 matrix arithmetic this CPU and its kernel offer: "amx" (AMX-BF16 tiles, Sapphire
// Rapids on: a red team's MLP trained 5-6 times faster under torch.autocast's bfloat16 on one,
// and nothing said so), "avx512" (AVX512_BF16 dot products, Cooper Lake, Zen 4: twice float32's
// lanes); nullptr where neither. What the `bfloat16` rule holds a float32 run's GEMMs against;
// libsonde records it as run_info cpu.bf16, `sonde calibrate` measures gemm.bf16 where it is.
inline const char* cpu_bf16_uncached() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return nullptr;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;  // CPUID.(7,0):EDX
  bool amx = (edx & kAmxBf16) && (edx & kAmxTile);
  unsigned subleaves = eax;
  bool avx512_bf16 = false;
  if (subleaves >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    avx512_bf16 = eax & (1u << 5);  // CPUID.(7,1):EAX AVX512_BF16
  }
  // The kernel must save the registers: AVX-512's state (libgcc's check) and, for AMX, the
  // tile configuration and data (XCR0 bits 17 and 18).
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return nullptr;
  if (amx) {
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    constexpr unsigned kTileState = (1u << 17) | (1u << 18);
    if ((lo & kTileState) == kTileState) return "amx";
  }
  return avx512_bf16 ? "avx512" : nullptr;
#else
  return nullptr;
#endif
}

// Read once: CPUID leaves the guest for the hypervisor on a VM, a microsecond or more each.
inline const char* cpu_bf16() {
  static const char* const kBf16 = cpu_bf16_uncached();
  return kBf16;
}

}  // namespace sonde
