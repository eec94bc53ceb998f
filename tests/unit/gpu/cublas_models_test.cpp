// Known answers for the cuBLAS and cuBLASLt GEMM models.
#include "cublas/cublas_models.hpp"

#include <gtest/gtest.h>

namespace cublas = sonde::cublas;
using sonde::DType;

TEST(CublasModels, RealGemmMatchesTheCpuBlasModel) {
  // 2mnk FLOPs; bytes 4 (mk + kn + mn), C not read when beta == 0.
  auto c = cublas::gemm('N', 'T', 64, 32, 16, 1, cublas::same_type(CUDA_R_32F), false);
  EXPECT_EQ(c.flops, 2u * 64 * 32 * 16);
  EXPECT_EQ(c.bytes, 4u * (64 * 16 + 16 * 32 + 64 * 32));
  EXPECT_EQ(c.shape.m, 64);
  EXPECT_EQ(c.shape.n, 32);
  EXPECT_EQ(c.shape.k, 16);
  EXPECT_EQ(c.shape.batch, 1);
  EXPECT_EQ(c.shape.trans_a, 'N');
  EXPECT_EQ(c.shape.trans_b, 'T');
  EXPECT_EQ(c.shape.dtype, DType::kF32);
  // beta != 0: C read and written.
  auto d = cublas::gemm('N', 'N', 8, 8, 8, 1, cublas::same_type(CUDA_R_64F), true);
  EXPECT_EQ(d.bytes, 8u * (64 + 64 + 2 * 64));
}

TEST(CublasModels, ComplexGemmIsEightFlopsPerMultiplyAdd) {
  auto c = cublas::gemm('C', 'N', 4, 4, 4, 1, cublas::same_type(CUDA_C_64F), false);
  EXPECT_EQ(c.flops, 8u * 64);
  EXPECT_EQ(c.bytes, 16u * 48);
  EXPECT_EQ(c.shape.dtype, DType::kC128);
  EXPECT_EQ(c.shape.trans_a, 'C');
}

TEST(CublasModels, MixedTypesCountEachOperandAtItsOwnSize) {
  // GemmEx: bf16 inputs, f32 output. The shape takes the input type.
  auto c = cublas::gemm('N', 'N', 128, 64, 32, 1,
                        cublas::ex_types(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F), false);
  EXPECT_EQ(c.flops, 2u * 128 * 64 * 32);
  EXPECT_EQ(c.bytes, 2u * 128 * 32 + 2u * 32 * 64 + 4u * 128 * 64);
  EXPECT_EQ(c.shape.dtype, DType::kBF16);
}

TEST(CublasModels, BatchMultipliesFlopsAndBytes) {
  auto c = cublas::gemm('N', 'N', 10, 20, 30, 5, cublas::same_type(CUDA_R_32F), false);
  EXPECT_EQ(c.flops, 5u * 2 * 10 * 20 * 30);
  EXPECT_EQ(c.bytes, 5u * 4 * (300 + 600 + 200));
  EXPECT_EQ(c.shape.batch, 5);
}

TEST(CublasModels, TypesWithoutAPeakKeepFlopsButNoShape) {
  auto c = cublas::gemm('N', 'N', 16, 16, 16, 1, cublas::same_type(CUDA_R_8I), false);
  EXPECT_EQ(c.flops, 2u * 4096);
  EXPECT_EQ(c.bytes, 3u * 256);
  EXPECT_EQ(c.shape.dtype, DType::kNone);
}

TEST(CublasModels, NegativeSizesCountAsZero) {
  auto c = cublas::gemm('N', 'N', -1, 4, 4, 0, cublas::same_type(CUDA_R_32F), true);
  EXPECT_EQ(c.flops, 0u);
  EXPECT_EQ(c.shape.batch, 1);
}

TEST(CublasModels, LtTakesMAndNFromDAndKFromOpA) {
  cublas::Layout a{cublas::type_info(CUDA_R_16F), 32, 64, 4};  // stored k x m: transposed
  cublas::Layout b{cublas::type_info(CUDA_R_16F), 32, 48, 4};
  cublas::Layout d{cublas::type_info(CUDA_R_16F), 64, 48, 4};
  auto c = cublas::lt_matmul('T', 'N', a, b, d, d, false);
  EXPECT_EQ(c.shape.m, 64);
  EXPECT_EQ(c.shape.n, 48);
  EXPECT_EQ(c.shape.k, 32);
  EXPECT_EQ(c.shape.batch, 4);
  EXPECT_EQ(c.shape.dtype, DType::kF16);
  EXPECT_EQ(c.flops, 4u * 2 * 64 * 48 * 32);
  EXPECT_EQ(c.bytes, 4u * 2 * (64 * 32 + 32 * 48 + 64 * 48));
  // Not transposed, A is m x k.
  cublas::Layout an{cublas::type_info(CUDA_R_16F), 64, 32, 4};
  EXPECT_EQ(cublas::lt_matmul('N', 'N', an, b, d, d, true).shape.k, 32);
  EXPECT_EQ(cublas::lt_matmul('N', 'N', an, b, d, d, true).bytes,
            c.bytes + 4u * 2 * 64 * 48);  // C read too
}

TEST(CublasModels, ScalarsAndZeroBeta) {
  float f0 = 0, f1 = 1;
  double d0 = 0, dz[2] = {0, 0.5};
  uint16_t h0 = 0x8000, h1 = 0x3c00;  // -0.0, 1.0
  EXPECT_FALSE(cublas::nonzero(&f0, cublas::Scalar::kF32, false));
  EXPECT_TRUE(cublas::nonzero(&f1, cublas::Scalar::kF32, false));
  EXPECT_FALSE(cublas::nonzero(&d0, cublas::Scalar::kF64, false));
  EXPECT_TRUE(cublas::nonzero(dz, cublas::Scalar::kF64, true));  // imaginary part
  EXPECT_FALSE(cublas::nonzero(&h0, cublas::Scalar::kF16, false));
  EXPECT_TRUE(cublas::nonzero(&h1, cublas::Scalar::kF16, false));
  EXPECT_TRUE(cublas::nonzero(nullptr, cublas::Scalar::kF32, false));
  EXPECT_EQ(cublas::scalar_of(CUBLAS_COMPUTE_16F), cublas::Scalar::kF16);
  EXPECT_EQ(cublas::scalar_of(CUBLAS_COMPUTE_32F_FAST_TF32), cublas::Scalar::kF32);
  EXPECT_EQ(cublas::scalar_of(CUBLAS_COMPUTE_64F), cublas::Scalar::kF64);
  EXPECT_EQ(cublas::scalar_of(CUBLAS_COMPUTE_32I), cublas::Scalar::kI32);
  EXPECT_EQ(cublas::scalar_of(CUDA_C_64F), cublas::Scalar::kF64);
}

TEST(CublasModels, OperationCharacters) {
  EXPECT_EQ(cublas::op_char(CUBLAS_OP_N), 'N');
  EXPECT_EQ(cublas::op_char(CUBLAS_OP_T), 'T');
  EXPECT_EQ(cublas::op_char(CUBLAS_OP_C), 'C');
}

TEST(CublasModels, GroupedGemmSumsGroupsAndReadsEachGroupsBeta) {
  const cublasOperation_t ta[2] = {CUBLAS_OP_N, CUBLAS_OP_T}, tb[2] = {CUBLAS_OP_N, CUBLAS_OP_N};
  const int m[2] = {8, 16}, n[2] = {4, 16}, k[2] = {2, 16}, size[2] = {3, 2};
  const double betas[2] = {0, 1};
  auto t = cublas::same_type(CUDA_R_64F);
  auto one = cublas::gemm('N', 'N', 8, 4, 2, 3, t, false);
  auto two = cublas::gemm('T', 'N', 16, 16, 16, 2, t, true);
  auto g = cublas::grouped(ta, tb, m, n, k, 2, size, t, betas, true, cublas::Scalar::kF64, false);
  EXPECT_EQ(g.flops, one.flops + two.flops);
  EXPECT_EQ(g.bytes, one.bytes + two.bytes);
  EXPECT_EQ(g.shape.dtype, DType::kNone);  // two shapes: none recorded
  // Scalars in device memory: every group's C counts as read.
  auto device =
      cublas::grouped(ta, tb, m, n, k, 2, size, t, betas, false, cublas::Scalar::kF64, false);
  EXPECT_EQ(device.bytes, g.bytes + 3 * 8 * 8 * 4);
  // One group keeps its shape; an empty group adds nothing.
  const int empty[2] = {3, 0};
  auto single =
      cublas::grouped(ta, tb, m, n, k, 1, size, t, betas, true, cublas::Scalar::kF64, false);
  EXPECT_EQ(single.shape.m, 8);
  EXPECT_EQ(single.shape.batch, 3);
  EXPECT_EQ(
      cublas::grouped(ta, tb, m, n, k, 2, empty, t, betas, true, cublas::Scalar::kF64, false).flops,
      one.flops);
}
