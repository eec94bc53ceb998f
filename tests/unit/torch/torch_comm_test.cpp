#include "torch_comm.hpp"

#include <gtest/gtest.h>

#include <string>

#include "torch_names.hpp"

namespace sonde::torch_ops {
namespace {

bool any(uint32_t, const void*) { return true; }
bool only(uint32_t key, const void* want) { return key == *static_cast<const uint32_t*>(want); }

void drain() {
  uint32_t key;
  uint64_t bytes;
  while (take_transfer(&any, nullptr, key, bytes)) {
  }
}

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
  ASSERT_TRUE(take_transfer(&any, nullptr, key, bytes));
  EXPECT_EQ(key, 1u);
  EXPECT_EQ(bytes, 100u);
  ASSERT_TRUE(take_transfer(&any, nullptr, key, bytes));
  EXPECT_EQ(key, 2u);
  EXPECT_FALSE(take_transfer(&any, nullptr, key, bytes));
}

TEST(TorchComm, AFullRingDropsRatherThanOverwrites) {
  for (uint64_t i = 0; i < 1000; ++i) post_transfer(7, i);
  uint32_t key = 0;
  uint64_t bytes = 0, n = 0, first = 99;
  while (take_transfer(&any, nullptr, key, bytes)) first = n++ == 0 ? bytes : first;
  EXPECT_EQ(n, 256u);
  EXPECT_EQ(first, 0u);
}

// Two threads with calls of different operations waiting: neither takes the other's event.
TEST(TorchComm, AnotherThreadsEventIsLeftForIt) {
  drain();
  post_transfer(1, 100);
  post_transfer(2, 200);
  uint32_t key = 0, want = 2;
  uint64_t bytes = 0;
  EXPECT_FALSE(take_transfer(&only, &want, key, bytes));  // the oldest is operation 1's
  want = 1;
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes));
  EXPECT_EQ(bytes, 100u);
  want = 2;
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes));
  EXPECT_EQ(bytes, 200u);
}

// An event nobody waits for (its thread ended) is taken once 32 more stand behind it.
TEST(TorchComm, AStaleEventDoesNotHoldTheOthersBack) {
  drain();
  post_transfer(5, 1);
  for (uint64_t i = 0; i < 40; ++i) post_transfer(6, 10 + i);
  uint32_t key = 0, want = 6;
  uint64_t bytes = 0;
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes));
  EXPECT_EQ(key, 5u);  // handed over to be dropped
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes));
  EXPECT_EQ(key, 6u);
  EXPECT_EQ(bytes, 10u);
  drain();
}

// A name per iteration (torch.profiler's ProfilerStep#N, record_function(f"iter{i}")) is never
// interned: it cannot fill the table the operators need.
TEST(TorchNames, RangesDoNotFillTheTable) {
  for (int i = 0; i < 10000; ++i) {
    std::string step = "ProfilerStep#" + std::to_string(i);
    ASSERT_EQ(op_name(step.c_str(), true)->role, Role::kIgnored);
  }
  ASSERT_NE(op_name("aten::addcdiv_", false), nullptr);
  EXPECT_EQ(names_refused(), 0u);
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
