// Which kernels an OpenBLAS runs, from its openblas_get_config() string (run_info blas.config,
// and what `sonde calibrate` prints), held against the vector instructions the CPU offers
// (run_info cpu.vector_isa). OpenBLAS's DYNAMIC_ARCH chooses its kernels by the CPU's model at
// load, and a release older than the CPU falls back to its SSE3 "Prescott" ones: Debian 12's
// 0.3.21 does so on Sapphire and Emerald Rapids, where a red team's float64 MLP spent 4.2 s in
// GEMMs that OPENBLAS_CORETYPE=SkylakeX ran in 1.2 s. One table, for the blas-kernels rule and
// for calibrate, which measures the peaks through those same kernels.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sonde::analyzers {

struct BlasKernels {
  std::string core;           // as the config names it: "Prescott", "Haswell", "SKYLAKEX"
  bool dynamic_arch = false;  // built with DYNAMIC_ARCH: OPENBLAS_CORETYPE picks another core
  std::string isa;            // the widest vector instructions its kernels use; "" unknown
};

// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64" -> {Prescott,
// dynamic, sse}; nullopt for a string that is not OpenBLAS's or names no core.
std::optional<BlasKernels> openblas_kernels(std::string_view config);

// Vector register bits of "sse" (128), "avx" and "avx2" (256), "avx512" (512); 0 unknown.
int vector_bits(std::string_view isa);

// The OPENBLAS_CORETYPE whose kernels use `isa` on any x86-64 CPU that offers it: SkylakeX,
// Haswell, Sandybridge; "" for sse or unknown.
std::string coretype_for(std::string_view isa);

// The kernels leave part of the CPU's vectors unused: their vector_bits under the CPU's.
bool kernels_narrower(const BlasKernels& kernels, std::string_view cpu_isa);

}  // namespace sonde::analyzers
