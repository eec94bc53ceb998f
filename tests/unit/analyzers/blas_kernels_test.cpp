// OpenBLAS's config strings as its releases write them (openblas_get_config: the version, the
// build options, the core, MAX_THREADS), and the kernels the blas-kernels rule reads from them.
#include "metrics/blas_kernels.hpp"

#include <gtest/gtest.h>

namespace sonde::analyzers {
namespace {

TEST(BlasKernels, TheCoreIsTheWordBeforeMaxThreads) {
  // Debian 12's libopenblas0-pthread on an Emerald Rapids Xeon its release does not know.
  auto k = openblas_kernels(
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->core, "Prescott");
  EXPECT_TRUE(k->dynamic_arch);
  EXPECT_EQ(k->isa, "sse");
  EXPECT_TRUE(kernels_narrower(*k, "avx512"));
  EXPECT_TRUE(kernels_narrower(*k, "avx2"));
  EXPECT_FALSE(kernels_narrower(*k, "sse"));
  // OPENBLAS_CORETYPE=SkylakeX on the same library.
  k = openblas_kernels(
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX "
      "MAX_THREADS=64");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->isa, "avx512");
  EXPECT_FALSE(kernels_narrower(*k, "avx512"));
  // A build for one target names it in capitals, without DYNAMIC_ARCH; an ILP64 one says so.
  k = openblas_kernels("OpenBLAS 0.3.26 USE64BITINT NO_AFFINITY HASWELL MAX_THREADS=128");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->core, "HASWELL");
  EXPECT_FALSE(k->dynamic_arch);
  EXPECT_EQ(k->isa, "avx2");
  EXPECT_TRUE(kernels_narrower(*k, "avx512"));
  // Zen on an AVX2 CPU: as wide as it offers.
  k = openblas_kernels("OpenBLAS 0.3.20 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64");
  ASSERT_TRUE(k);
  EXPECT_FALSE(kernels_narrower(*k, "avx2"));
  // Sandybridge's AVX on an AVX2 CPU: the same width; FMA is not what the rule measures.
  k = openblas_kernels("OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Sandybridge MAX_THREADS=64");
  ASSERT_TRUE(k);
  EXPECT_FALSE(kernels_narrower(*k, "avx2"));
  EXPECT_TRUE(kernels_narrower(*k, "avx512"));
}

TEST(BlasKernels, WhatItDoesNotKnowItLeavesAlone) {
  EXPECT_FALSE(openblas_kernels(""));
  EXPECT_FALSE(openblas_kernels("BLIS 0.9.0"));
  EXPECT_FALSE(openblas_kernels("OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY"));  // no core
  auto k = openblas_kernels("OpenBLAS 0.3.27 DYNAMIC_ARCH NO_AFFINITY neoversen1 MAX_THREADS=64");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->isa, "");  // not an x86-64 core: never narrower
  EXPECT_FALSE(kernels_narrower(*k, "avx512"));
  EXPECT_EQ(vector_bits("sse"), 128);
  EXPECT_EQ(vector_bits("avx512"), 512);
  EXPECT_EQ(vector_bits("neon"), 0);
  EXPECT_EQ(coretype_for("avx512"), "SkylakeX");
  EXPECT_EQ(coretype_for("avx2"), "Haswell");
  EXPECT_EQ(coretype_for("sse"), "");
}

}  // namespace
}  // namespace sonde::analyzers
