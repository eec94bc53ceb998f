// Known answers for the cuDNN convolution and data-movement models.
#include "cudnn/cudnn_models.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

namespace cudnn = sonde::cudnn;
using sonde::DType;

namespace {
cudnn::Dims dims(std::initializer_list<int64_t> d, cudnnDataType_t t = CUDNN_DATA_FLOAT) {
  cudnn::Dims r;
  r.type = t;
  for (int64_t v : d) r.d[r.nd++] = v;
  return r;
}

// 2 x 3 x 32 x 32 input, 8 filters 3 x 3 x 3, padding 1: output 2 x 8 x 32 x 32.
cudnn::ConvCall plain(cudnn::ConvPass pass) {
  cudnn::ConvCall c;
  c.x = dims({2, 3, 32, 32});
  c.w = dims({8, 3, 3, 3});
  c.y = dims({2, 8, 32, 32});
  c.pass = pass;
  return c;
}
constexpr uint64_t kX = 2 * 3 * 32 * 32, kW = 8 * 3 * 3 * 3, kY = 2 * 8 * 32 * 32;
constexpr uint64_t kFlops = 2ull * 2 * 8 * 32 * 32 * 3 * 3 * 3;  // 2 N K P Q C R S
}  // namespace

TEST(CudnnModels, ForwardConvolution) {
  auto c = cudnn::convolution(plain(cudnn::ConvPass::kForward));
  EXPECT_EQ(c.flops, kFlops);
  EXPECT_EQ(c.flops, 884736u);
  EXPECT_EQ(c.bytes, 4 * (kX + kW + kY));
  EXPECT_EQ(c.shape.m, 2 * 32 * 32);
  EXPECT_EQ(c.shape.n, 8);
  EXPECT_EQ(c.shape.k, 27);
  EXPECT_EQ(c.shape.batch, 1);
  EXPECT_EQ(c.shape.dtype, DType::kF32);
}

TEST(CudnnModels, BackwardPassesDoTheForwardMultiplyAdds) {
  auto data = plain(cudnn::ConvPass::kBackwardData);
  data.out_read = true;  // beta != 0: dx read and written
  auto d = cudnn::convolution(data);
  EXPECT_EQ(d.flops, kFlops);
  EXPECT_EQ(d.bytes, 4 * (kW + kY + 2 * kX));
  EXPECT_EQ(d.shape.m, 2048);
  EXPECT_EQ(d.shape.n, 27);
  EXPECT_EQ(d.shape.k, 8);
  auto f = cudnn::convolution(plain(cudnn::ConvPass::kBackwardFilter));
  EXPECT_EQ(f.flops, kFlops);
  EXPECT_EQ(f.bytes, 4 * (kX + kY + kW));
  EXPECT_EQ(f.shape.m, 8);
  EXPECT_EQ(f.shape.n, 27);
  EXPECT_EQ(f.shape.k, 2048);
}

TEST(CudnnModels, GroupedStridedConvolution) {
  // 1 x 4 x 8 x 8, 6 filters of 2 x 3 x 3 in 2 groups, stride 2: output 1 x 6 x 3 x 3.
  cudnn::ConvCall c;
  c.x = dims({1, 4, 8, 8});
  c.w = dims({6, 2, 3, 3});
  c.y = dims({1, 6, 3, 3});
  c.groups = 2;
  auto r = cudnn::convolution(c);
  EXPECT_EQ(r.flops, 2u * 1 * 6 * 9 * 2 * 9);  // 2 N K P Q (C/G) R S
  EXPECT_EQ(r.shape.m, 9);
  EXPECT_EQ(r.shape.n, 3);
  EXPECT_EQ(r.shape.k, 18);
  EXPECT_EQ(r.shape.batch, 2);
}

TEST(CudnnModels, ThreeDimensionalAndHalf) {
  cudnn::ConvCall c;
  c.x = dims({1, 2, 4, 4, 4}, CUDNN_DATA_HALF);
  c.w = dims({3, 2, 2, 2, 2}, CUDNN_DATA_HALF);
  c.y = dims({1, 3, 3, 3, 3}, CUDNN_DATA_HALF);
  auto r = cudnn::convolution(c);
  EXPECT_EQ(r.flops, 2u * 3 * 27 * 2 * 8);
  EXPECT_EQ(r.bytes, 2u * (128 + 48 + 81));
  EXPECT_EQ(r.shape.dtype, DType::kF16);
}

TEST(CudnnModels, ExtraInputsAndUnknownDescriptors) {
  auto c = plain(cudnn::ConvPass::kForward);
  c.extra_read = 100;
  EXPECT_EQ(cudnn::convolution(c).bytes, 4 * (kX + kW + kY) + 100);
  cudnn::ConvCall unknown;  // descriptors that could not be read: no FLOPs, no shape
  auto u = cudnn::convolution(unknown);
  EXPECT_EQ(u.flops, 0u);
  EXPECT_EQ(u.shape.dtype, DType::kNone);
}

TEST(CudnnModels, DataMovementAndScales) {
  EXPECT_EQ(cudnn::data_movement(100, 50, false).bytes, 150u);
  EXPECT_EQ(cudnn::data_movement(100, 50, true).bytes, 200u);
  EXPECT_EQ(cudnn::data_movement(100, 50, true).flops, 0u);
  EXPECT_EQ(cudnn::bytes_of(dims({2, 8, 16, 16})), 4u * 4096);
  EXPECT_EQ(cudnn::bytes_of(dims({2, 8}, CUDNN_DATA_DOUBLE)), 8u * 16);
  float f0 = 0, f1 = 2;
  double d0 = 0;
  EXPECT_FALSE(cudnn::nonzero_scale(&f0, CUDNN_DATA_HALF));
  EXPECT_TRUE(cudnn::nonzero_scale(&f1, CUDNN_DATA_FLOAT));
  EXPECT_FALSE(cudnn::nonzero_scale(&d0, CUDNN_DATA_DOUBLE));
  EXPECT_TRUE(cudnn::nonzero_scale(nullptr, CUDNN_DATA_FLOAT));
}
