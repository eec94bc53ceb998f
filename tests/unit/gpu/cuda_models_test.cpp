// Known answers for the CUDA runtime and driver models: copies move their byte count, in the
// direction the cudaMemcpyKind names.
#include "cuda/cuda_models.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cuda = sonde::cuda;

TEST(CudaModels, CopyDirectionFollowsTheKind) {
  EXPECT_EQ(cuda::copy_dir(0), cuda::CopyDir::kHtoH);
  EXPECT_EQ(cuda::copy_dir(1), cuda::CopyDir::kHtoD);
  EXPECT_EQ(cuda::copy_dir(2), cuda::CopyDir::kDtoH);
  EXPECT_EQ(cuda::copy_dir(3), cuda::CopyDir::kDtoD);
  EXPECT_EQ(cuda::copy_dir(4), cuda::CopyDir::kDefault);
  EXPECT_EQ(cuda::copy_dir(7), cuda::CopyDir::kDefault);
  EXPECT_EQ(cuda::copy_dir(-1), cuda::CopyDir::kDefault);
}

TEST(CudaModels, DirectionNames) {
  EXPECT_EQ(std::string(cuda::kCopyDirNames[size_t(cuda::CopyDir::kHtoD)]), "HtoD");
  EXPECT_EQ(std::string(cuda::kCopyDirNames[size_t(cuda::CopyDir::kDtoH)]), "DtoH");
  EXPECT_EQ(std::string(cuda::kCopyDirNames[size_t(cuda::CopyDir::kDtoD)]), "DtoD");
  EXPECT_EQ(std::string(cuda::kCopyDirNames[size_t(cuda::CopyDir::kDefault)]), "Default");
}

TEST(CudaModels, BytesMoved) {
  EXPECT_EQ(cuda::moved(1000).bytes, 1000u);
  EXPECT_EQ(cuda::moved(1000).flops, 0u);
  EXPECT_EQ(cuda::moved_2d(100, 10).bytes, 1000u);  // rows of width, not pitch
  EXPECT_EQ(cuda::no_cost().bytes, 0u);
  EXPECT_EQ(cuda::moved(5).shape.dtype, sonde::DType::kNone);
}
