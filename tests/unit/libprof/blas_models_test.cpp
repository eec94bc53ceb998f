#include "blas/blas_models.hpp"

#include <gtest/gtest.h>

namespace sonde::blas {
namespace {

TEST(BlasModels, GemmRealCountsTwoFlopsPerMultiplyAdd) {
  CallCost c = gemm('N', 'T', 2, 3, 4, DType::kF32, false);
  EXPECT_EQ(c.flops, 2u * 2 * 3 * 4);
  // A (m x k) + B (k x n) + C (m x n) written once.
  EXPECT_EQ(c.bytes, 4u * (2 * 4 + 4 * 3 + 2 * 3));
  EXPECT_EQ(c.shape.m, 2);
  EXPECT_EQ(c.shape.n, 3);
  EXPECT_EQ(c.shape.k, 4);
  EXPECT_EQ(c.shape.batch, 1);
  EXPECT_EQ(c.shape.trans_a, 'N');
  EXPECT_EQ(c.shape.trans_b, 'T');
  EXPECT_EQ(c.shape.dtype, DType::kF32);
}

TEST(BlasModels, GemmWithBetaReadsCToo) {
  CallCost c = gemm('N', 'N', 2, 3, 4, DType::kF64, true);
  EXPECT_EQ(c.flops, 2u * 24);
  EXPECT_EQ(c.bytes, 8u * (8 + 12 + 2 * 6));
}

TEST(BlasModels, GemmComplexCountsEightFlopsPerMultiplyAdd) {
  CallCost c64 = gemm('C', 'N', 5, 6, 7, DType::kC64, false);
  EXPECT_EQ(c64.flops, 8u * 5 * 6 * 7);
  EXPECT_EQ(c64.bytes, 8u * (35 + 42 + 30));
  CallCost c128 = gemm('N', 'N', 5, 6, 7, DType::kC128, true);
  EXPECT_EQ(c128.flops, 8u * 5 * 6 * 7);
  EXPECT_EQ(c128.bytes, 16u * (35 + 42 + 60));
}

TEST(BlasModels, GemmLargeSizesDoNotOverflow) {
  CallCost c = gemm('N', 'N', 100000, 100000, 100000, DType::kF64, false);
  EXPECT_EQ(c.flops, 2000000000000000ull);
  EXPECT_EQ(c.bytes, 8ull * 3 * 10000000000ull);
}

TEST(BlasModels, NegativeSizesClampToZero) {
  CallCost c = gemm('N', 'N', -1, 3, 4, DType::kF32, false);
  EXPECT_EQ(c.flops, 0u);
  EXPECT_EQ(c.shape.m, 0);
  EXPECT_EQ(c.bytes, 4u * 12);  // only B (k x n) is left
  EXPECT_EQ(gemv('N', -5, 4, DType::kF32, false).flops, 0u);
  EXPECT_EQ(ger(3, -4, DType::kF64).flops, 0u);
  EXPECT_EQ(dot(-10, DType::kF32).flops, 0u);
  EXPECT_EQ(dot(-10, DType::kF32).bytes, 0u);
  EXPECT_EQ(syrk('N', -3, 5, DType::kF64, true).flops, 0u);
  int negative = -7, positive = 7;
  EXPECT_EQ(val(&negative), 0);
  EXPECT_EQ(val(&positive), 7);
  EXPECT_EQ(val(static_cast<const int*>(nullptr)), 0);
}

TEST(BlasModels, SyrkCountsOneTriangle) {
  CallCost c = syrk('N', 3, 5, DType::kF64, false);
  EXPECT_EQ(c.flops, 2u * (3 * 4 / 2) * 5);
  EXPECT_EQ(c.bytes, 8u * (3 * 5 + 6));
  EXPECT_EQ(syrk('N', 3, 5, DType::kF64, true).bytes, 8u * (3 * 5 + 12));
  EXPECT_EQ(c.shape.m, 3);
  EXPECT_EQ(c.shape.n, 3);
  EXPECT_EQ(c.shape.k, 5);
  EXPECT_EQ(c.shape.trans_a, 'N');
  EXPECT_EQ(c.shape.trans_b, 'T');
  CallCost t = syrk('T', 4, 2, DType::kC64, false);
  EXPECT_EQ(t.flops, 8u * (4 * 5 / 2) * 2);
  EXPECT_EQ(t.shape.trans_a, 'T');
  EXPECT_EQ(t.shape.trans_b, 'N');
}

TEST(BlasModels, GemvSizesFollowTheTranspose) {
  // A is 3 x 4. Not transposed: x has 4 elements, y has 3.
  CallCost n = gemv('N', 3, 4, DType::kF32, false);
  EXPECT_EQ(n.flops, 2u * 12);
  EXPECT_EQ(n.bytes, 4u * (12 + 4 + 3));
  EXPECT_EQ(gemv('N', 3, 4, DType::kF32, true).bytes, 4u * (12 + 4 + 6));
  // Transposed: x has 3, y has 4.
  EXPECT_EQ(gemv('T', 3, 4, DType::kF32, true).bytes, 4u * (12 + 3 + 8));
  EXPECT_EQ(gemv('C', 3, 4, DType::kC128, false).flops, 8u * 12);
  EXPECT_EQ(n.shape.dtype, DType::kNone);  // no shape recorded for level 2
}

TEST(BlasModels, GerReadsAndWritesA) {
  CallCost c = ger(3, 4, DType::kF64);
  EXPECT_EQ(c.flops, 2u * 12);
  EXPECT_EQ(c.bytes, 8u * (2 * 12 + 3 + 4));
  EXPECT_EQ(ger(3, 4, DType::kC64).flops, 8u * 12);
}

TEST(BlasModels, LevelOne) {
  EXPECT_EQ(dot(10, DType::kF32).flops, 20u);
  EXPECT_EQ(dot(10, DType::kF32).bytes, 4u * 20);
  EXPECT_EQ(dot(10, DType::kC128).flops, 80u);
  EXPECT_EQ(dot(10, DType::kC128).bytes, 16u * 20);
  EXPECT_EQ(axpy(10, DType::kF64).flops, 20u);
  EXPECT_EQ(axpy(10, DType::kF64).bytes, 8u * 30);
  EXPECT_EQ(axpy(10, DType::kC64).flops, 80u);
}

TEST(BlasModels, ScalDependsOnTheKindOfAlpha) {
  EXPECT_EQ(scal(10, DType::kF32, false).flops, 10u);
  EXPECT_EQ(scal(10, DType::kF32, false).bytes, 4u * 20);
  EXPECT_EQ(scal(10, DType::kC64, true).flops, 60u);   // zscal / cscal
  EXPECT_EQ(scal(10, DType::kC64, false).flops, 20u);  // csscal / zdscal
  EXPECT_EQ(scal(10, DType::kC128, false).bytes, 16u * 20);
}

TEST(BlasModels, TransCharFromCblasEnums) {
  EXPECT_EQ(trans_char(kNoTrans), 'N');
  EXPECT_EQ(trans_char(kTrans), 'T');
  EXPECT_EQ(trans_char(kConjTrans), 'C');
  EXPECT_EQ(trans_char(0), 'N');
}

TEST(BlasModels, TransCharFromFortranChars) {
  EXPECT_EQ(trans_char("N"), 'N');
  EXPECT_EQ(trans_char("n"), 'N');
  EXPECT_EQ(trans_char("T"), 'T');
  EXPECT_EQ(trans_char("t"), 'T');
  EXPECT_EQ(trans_char("C"), 'C');
  EXPECT_EQ(trans_char("c"), 'C');
  EXPECT_EQ(trans_char("x"), 'N');
  EXPECT_EQ(trans_char(static_cast<const char*>(nullptr)), 'N');
}

TEST(BlasModels, ElementSizesAndComplexZero) {
  EXPECT_EQ(element_size(DType::kF32), 4);
  EXPECT_EQ(element_size(DType::kF64), 8);
  EXPECT_EQ(element_size(DType::kC64), 8);
  EXPECT_EQ(element_size(DType::kC128), 16);
  EXPECT_EQ(element_size(DType::kNone), 0);
  float zero_f[2] = {0, 0}, imag_f[2] = {0, 1};
  double zero_d[2] = {0, 0}, real_d[2] = {2, 0};
  EXPECT_FALSE(nonzero_complex(zero_f, DType::kC64));
  EXPECT_TRUE(nonzero_complex(imag_f, DType::kC64));
  EXPECT_FALSE(nonzero_complex(zero_d, DType::kC128));
  EXPECT_TRUE(nonzero_complex(real_d, DType::kC128));
  EXPECT_TRUE(nonzero_complex(nullptr, DType::kC64));
}

}  // namespace
}  // namespace sonde::blas
