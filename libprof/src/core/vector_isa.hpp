// The widest vector instructions this CPU and its kernel let a program use: what a library
// built for an older core leaves unused (OpenBLAS's DYNAMIC_ARCH falls back to its SSE3
// "Prescott" kernels on a CPU it does not know: a red team's float64 MLP on an AVX-512 Xeon ran
// its GEMMs 3.5 times slower so, and nothing said it). Recorded as run_info cpu.vector_isa.
#pragma once

namespace sonde {

// "avx512" (AVX-512 F), "avx2" (AVX2 with FMA), "avx", "sse"; nullptr off x86-64.
const char* vector_isa();

}  // namespace sonde
