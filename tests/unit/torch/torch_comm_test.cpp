#include "torch_comm.hpp"

#include <gtest/gtest.h>

#include "torch_names.hpp"

namespace sonde::torch_ops {
namespace {

TEST(TorchComm, CallAndBackendEventAreOneOperation) {
  EXPECT_EQ(operation_key("c10d::allreduce_"), operation_key("gloo:all_reduce"));
  EXPECT_EQ(operation_key("c10d::allgather_"), operation_key("nccl:all_gather"));
  EXPECT_EQ(operation_key("c10d::recv_"), operation_key("gloo:recv"));
  EXPECT_EQ(operation_key("c10d::barrier"), operation_key("mpi:barrier"));
  EXPECT_NE(operation_key("c10d::allreduce_"), operation_key("gloo:broadcast"));
}

TEST(TorchComm, EventsAreTakenOnceInOrder) {
  post_transfer(1, 100);
  post_transfer(2, 200);
  uint32_t key = 0;
  uint64_t bytes = 0;
  ASSERT_TRUE(take_transfer(key, bytes));
  EXPECT_EQ(key, 1u);
  EXPECT_EQ(bytes, 100u);
  ASSERT_TRUE(take_transfer(key, bytes));
  EXPECT_EQ(key, 2u);
  EXPECT_FALSE(take_transfer(key, bytes));
}

TEST(TorchComm, AFullRingDropsRatherThanOverwrites) {
  for (uint64_t i = 0; i < 1000; ++i) post_transfer(7, i);
  uint32_t key = 0;
  uint64_t bytes = 0, n = 0, first = 99;
  while (take_transfer(key, bytes)) first = n++ == 0 ? bytes : first;
  EXPECT_EQ(n, 256u);
  EXPECT_EQ(first, 0u);
}

TEST(TorchNames, RolesByScopeAndName) {
  EXPECT_EQ(op_name("aten::conv2d", false)->role, Role::kOperator);
  EXPECT_EQ(op_name("c10d::allreduce_", false)->role, Role::kCollective);
  EXPECT_EQ(op_name("c10d::send", false)->role, Role::kP2P);
  EXPECT_EQ(op_name("gloo:all_reduce", true)->role, Role::kTransfer);
  // A record_function range is the Python hook's region, never a torch frame as well.
  EXPECT_EQ(op_name("Optimizer.step#SGD.step", true)->role, Role::kIgnored);
  // Looked up by content: a name built per call finds the routine its first copy registered.
  std::string again = "aten::conv2d";
  EXPECT_EQ(op_name(again.c_str(), false), op_name("aten::conv2d", false));
  EXPECT_NE(op_name("aten::conv2d", true), op_name("aten::conv2d", false));
}

TEST(TorchNames, DtypeSizes) {
  EXPECT_EQ(dtype_bytes("float"), 4);
  EXPECT_EQ(dtype_bytes("c10::BFloat16"), 2);
  EXPECT_EQ(dtype_bytes("long int"), 8);
  EXPECT_EQ(dtype_bytes("c10::Float8_e4m3fn"), 1);
  EXPECT_EQ(dtype_bytes("GenericList"), 0);
  EXPECT_EQ(dtype_bytes(nullptr), 0);
}

}  // namespace
}  // namespace sonde::torch_ops
