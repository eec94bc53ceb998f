// A GEMM operator's FLOPs from its recorded input shapes, as torch.profiler's with_flops counts
// them (2·M·K·N a product; its figures for the same shapes, torch 1.13: addmm 16x676 by 676x10
// 216,320, mm of a 3-D by 2-D matmul 720, bmm 2x3x4 by 2x4x5 240).
#include "metrics/operator_flops.hpp"

#include <gtest/gtest.h>

namespace sonde::analyzers {
namespace {

TEST(OperatorFlops, TorchProfilersFiguresForTheSameShapes) {
  EXPECT_EQ(operator_call_flops("aten::addmm", "[[10], [16, 676], [676, 10], [], []]",
                                "float, float, float, Scalar, Scalar"),
            216320.0);
  EXPECT_EQ(operator_call_flops("aten::mm", "[[10, 16], [16, 676]]", "float, float"), 216320.0);
  EXPECT_EQ(operator_call_flops("aten::matmul", "[[3, 4, 5], [5, 6]]", "float, float"), 720.0);
  EXPECT_EQ(operator_call_flops("aten::bmm", "[[2, 3, 4], [2, 4, 5]]", "float, float"), 240.0);
}

TEST(OperatorFlops, LinearAndTheOtherProducts) {
  // nn.Linear(676, 10) on a batch of 16: the addmm beneath it, counted at the top-level operator.
  EXPECT_EQ(
      operator_call_flops("aten::linear", "[[16, 676], [10, 676], [10]]", "float, float, float"),
      216320.0);
  // A sequence model's linear: batch 4 x sequence 32 of 64 features to 128.
  EXPECT_EQ(operator_call_flops("aten::linear", "[[4, 32, 64], [128, 64], []]", "float, float, "),
            2.0 * 4 * 32 * 64 * 128);
  EXPECT_EQ(operator_call_flops("aten::baddbmm", "[[2, 3, 5], [2, 3, 4], [2, 4, 5], [], []]",
                                "float, float, float, Scalar, Scalar"),
            240.0);
  EXPECT_EQ(operator_call_flops("aten::mv", "[[8, 3], [3]]", "double, double"), 48.0);
  EXPECT_EQ(operator_call_flops("aten::matmul", "[[5], [5]]", "float, float"), 10.0);
  EXPECT_EQ(operator_call_flops("aten::matmul", "[[4, 5], [5]]", "float, float"), 40.0);
  EXPECT_EQ(operator_call_flops("aten::matmul", "[[5], [2, 5, 6]]", "float, float"), 120.0);
  // Batches broadcast: (2, 1, 3, 4) by (5, 4, 6) is a batch of 10 products of 3x4 by 4x6.
  EXPECT_EQ(operator_call_flops("aten::matmul", "[[2, 1, 3, 4], [5, 4, 6]]",
                                "c10::Half, "
                                "c10::Half"),
            2.0 * 10 * 3 * 4 * 6);
}

TEST(OperatorFlops, NothingWhereTheShapesDoNotMultiplyOrTheOperatorIsNoProduct) {
  EXPECT_FALSE(operator_call_flops("aten::mm", "[[10, 16], [17, 676]]", "float, float"));
  EXPECT_FALSE(operator_call_flops("aten::matmul", "[[2, 3, 4], [3, 4, 6]]", "float, float"));
  EXPECT_FALSE(operator_call_flops("aten::mm", "[[10, 16], [16, 6]]", "long int, long int"));
  EXPECT_FALSE(operator_call_flops("aten::addmm", "[[10, 16], [16, 6]]", "float, float"));
  EXPECT_FALSE(operator_call_flops("aten::conv2d",
                                   "[[16, 1, 28, 28], [4, 1, 3, 3], [4], [], [], "
                                   "[], []]",
                                   "float, float, float, GenericList, GenericList, GenericList, "
                                   "Int"));
  EXPECT_FALSE(operator_call_flops("aten::relu", "[[16, 4]]", "float"));
  EXPECT_FALSE(operator_call_flops("aten::mm", "not json", "float, float"));
  EXPECT_FALSE(operator_call_flops("aten::mm", "[[10, 16], [16, 6]]", ""));
}

}  // namespace
}  // namespace sonde::analyzers
