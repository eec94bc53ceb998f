// The oneDNN cost models on hand-built memory descriptors: FLOPs, bytes and GEMM views of
// convolutions (plain, grouped, strided, backward), deconvolution, inner product and matmul.
#include "onednn/onednn_models.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

namespace sonde::onednn {
namespace {

dnnl_memory_desc_t md(std::initializer_list<int64_t> dims, dnnl_data_type_t t = dnnl_f32) {
  dnnl_memory_desc_t m{};
  for (int64_t d : dims) m.dims[m.ndims++] = d;
  m.data_type = t;
  return m;
}

Tensors tensors(const dnnl_memory_desc_t& src, const dnnl_memory_desc_t& w,
                const dnnl_memory_desc_t& dst) {
  return Tensors{&src, &w, &dst, bytes_of(&src) + bytes_of(&w) + bytes_of(&dst)};
}

void expect_shape(const CallCost& c, int64_t m, int64_t n, int64_t k, int64_t batch) {
  EXPECT_EQ(c.shape.m, m);
  EXPECT_EQ(c.shape.n, n);
  EXPECT_EQ(c.shape.k, k);
  EXPECT_EQ(c.shape.batch, batch);
  EXPECT_EQ(c.flops, 2 * uint64_t(m * n * k * batch));
}

TEST(OnednnModels, ConvolutionForward) {
  auto src = md({2, 3, 16, 16}), w = md({8, 3, 3, 3}), dst = md({2, 8, 16, 16});
  CallCost c = convolution(Dir::kFwd, tensors(src, w, dst));
  EXPECT_EQ(c.flops, 2ull * 2 * 8 * 16 * 16 * 3 * 3 * 3);
  EXPECT_EQ(c.bytes, 4ull * (1536 + 216 + 4096));
  EXPECT_EQ(c.shape.dtype, DType::kF32);
  expect_shape(c, 2 * 16 * 16, 8, 27, 1);
}

TEST(OnednnModels, GroupedStridedConvolutionAndItsBackward) {
  // groups 2, stride 2: weights are G x OC/G x IC/G x KH x KW.
  auto src = md({4, 8, 10, 12}), w = md({2, 3, 4, 3, 5}), dst = md({4, 6, 4, 4});
  Tensors t = tensors(src, w, dst);
  expect_shape(convolution(Dir::kFwd, t), 4 * 16, 3, 4 * 15, 2);
  expect_shape(convolution(Dir::kBwdData, t), 4 * 16, 4 * 15, 3, 2);
  expect_shape(convolution(Dir::kBwdWeights, t), 3, 4 * 15, 4 * 16, 2);
  for (Dir d : {Dir::kFwd, Dir::kBwdData, Dir::kBwdWeights}) {
    EXPECT_EQ(convolution(d, t).flops, 46080u);
  }
}

TEST(OnednnModels, DeconvolutionScattersEveryInputPoint) {
  // 1x4x5x5 -> 1x2x11x11, 3x3 kernel, stride 2: each input point times OC*KH*KW.
  auto src = md({1, 4, 5, 5}), w = md({2, 4, 3, 3}), dst = md({1, 2, 11, 11});
  CallCost c = deconvolution(Dir::kFwd, tensors(src, w, dst));
  EXPECT_EQ(c.flops, 2ull * 25 * 4 * 2 * 9);
  expect_shape(c, 25, 2 * 9, 4, 1);
}

TEST(OnednnModels, InnerProductFlattensSpatialInput) {
  auto src = md({5, 4, 3, 3}), w = md({7, 4, 3, 3}), dst = md({5, 7});
  Tensors t = tensors(src, w, dst);
  expect_shape(inner_product(Dir::kFwd, t), 5, 7, 36, 1);
  expect_shape(inner_product(Dir::kBwdData, t), 5, 36, 7, 1);
  expect_shape(inner_product(Dir::kBwdWeights, t), 7, 36, 5, 1);
}

TEST(OnednnModels, MatmulBatchFromDestination) {
  auto src = md({3, 8, 16}), w = md({1, 16, 4}), dst = md({3, 8, 4});
  expect_shape(matmul(tensors(src, w, dst)), 8, 4, 16, 3);
}

TEST(OnednnModels, OtherTypesKeepCostButNoShape) {
  auto src = md({2, 3, 4, 4}, dnnl_bf16), w = md({8, 3, 1, 1}, dnnl_bf16),
       dst = md({2, 8, 4, 4}, dnnl_bf16);
  CallCost c = convolution(Dir::kFwd, tensors(src, w, dst));
  EXPECT_EQ(c.flops, 2ull * 2 * 16 * 8 * 3);
  EXPECT_EQ(c.bytes, 2ull * (96 + 24 + 256));
  EXPECT_EQ(c.shape.dtype, DType::kNone);
}

TEST(OnednnModels, RuntimeAndMissingDimsCostNothing) {
  auto runtime = md({DNNL_RUNTIME_DIM_VAL, 16});
  EXPECT_EQ(bytes_of(&runtime), 0u);
  EXPECT_EQ(bytes_of(nullptr), 0u);
  Tensors empty;
  EXPECT_EQ(cost(dnnl_convolution, Dir::kFwd, empty).flops, 0u);
  EXPECT_EQ(cost(dnnl_reorder, Dir::kNone, empty).bytes, 0u);
}

TEST(OnednnModels, Directions) {
  EXPECT_EQ(direction(dnnl_forward_inference), Dir::kFwd);
  EXPECT_EQ(direction(dnnl_backward_weights), Dir::kBwdWeights);
  EXPECT_EQ(direction(dnnl_prop_kind_undef), Dir::kNone);
}

}  // namespace
}  // namespace sonde::onednn
