// Known answers for the NCCL byte model: count times element size.
#include "nccl/nccl_models.hpp"

#include <gtest/gtest.h>

namespace nccl = sonde::nccl;

TEST(NcclModels, BytesAreCountTimesElementSize) {
  EXPECT_EQ(nccl::moved(1000, ncclFloat32).bytes, 4000u);
  EXPECT_EQ(nccl::moved(10, ncclFloat64).bytes, 80u);
  EXPECT_EQ(nccl::moved(7, ncclInt8).bytes, 7u);
  EXPECT_EQ(nccl::moved(100, ncclBfloat16).bytes, 200u);
  EXPECT_EQ(nccl::moved(50, ncclFloat16).bytes, 100u);
  EXPECT_EQ(nccl::moved(3, ncclUint64).bytes, 24u);
  EXPECT_EQ(nccl::moved(9, ncclFloat8e4m3).bytes, 9u);
  EXPECT_EQ(nccl::moved(3, ncclInt64).flops, 0u);
}
