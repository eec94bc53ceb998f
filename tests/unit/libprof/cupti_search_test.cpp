// Where sonde looks for libcupti: the CUPTI of the runtime the program loaded, beside it first.
#include "gpu/cupti_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace sonde {
namespace {

TEST(CuptiSearch, RuntimeMajorComesFromItsFileName) {
  EXPECT_EQ(cuda_runtime_major("/venv/lib/nvidia/cuda_runtime/lib/libcudart.so.12"), 12);
  EXPECT_EQ(cuda_runtime_major("/usr/local/cuda-13.0/lib64/libcudart.so.13.0.48"), 13);
  EXPECT_EQ(cuda_runtime_major("libcudart.so.12.4.127"), 12);
  EXPECT_EQ(cuda_runtime_major("/usr/lib/libcudart_static.a"), 0);
  EXPECT_EQ(cuda_runtime_major(""), 0);
}

TEST(CuptiSearch, PipCuda12LooksInCudaCuptiBesideCudaRuntime) {
  auto c = cupti_candidates("/venv/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12", 13000);
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[0], "/venv/site-packages/nvidia/cuda_runtime/lib/libcupti.so.12");
  EXPECT_EQ(c[1], "/venv/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12");
  // Only CUDA 12's CUPTI: a newer driver does not make CUPTI 13 match a 12 runtime.
  for (const auto& file : c) EXPECT_TRUE(file.ends_with("libcupti.so.12")) << file;
}

TEST(CuptiSearch, PipCuda13FindsCuptiInTheRuntimesFolder) {
  auto c = cupti_candidates("/venv/site-packages/nvidia/cu13/lib/libcudart.so.13", 13000);
  EXPECT_EQ(c[0], "/venv/site-packages/nvidia/cu13/lib/libcupti.so.13");
  for (const auto& file : c) EXPECT_TRUE(file.ends_with("libcupti.so.13")) << file;
}

TEST(CuptiSearch, ToolkitLooksInExtrasCupti) {
  auto c = cupti_candidates("/usr/local/cuda-12.6/targets/x86_64-linux/lib/libcudart.so.12", 0);
  EXPECT_NE(std::find(c.begin(), c.end(), "/usr/local/cuda-12.6/extras/CUPTI/lib64/libcupti.so.12"),
            c.end());
  c = cupti_candidates("/usr/local/cuda-12.6/lib64/libcudart.so.12", 0);
  EXPECT_NE(std::find(c.begin(), c.end(), "/usr/local/cuda-12.6/extras/CUPTI/lib64/libcupti.so.12"),
            c.end());
  EXPECT_NE(std::find(c.begin(), c.end(), "libcupti.so.12"), c.end());
}

TEST(CuptiSearch, WithoutARuntimeTheDriverOrdersTheMajors) {
  auto c = cupti_candidates("", 13000);
  EXPECT_EQ(c.front(), "libcupti.so.13");
  EXPECT_EQ(c.back(), "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.12");
  c = cupti_candidates("", 12080);  // a CUDA 12 driver cannot run CUPTI 13
  for (const auto& file : c) EXPECT_TRUE(file.ends_with("libcupti.so.12")) << file;
  c = cupti_candidates("", 0);
  EXPECT_EQ(c.front(), "libcupti.so.13");
}

}  // namespace
}  // namespace sonde
