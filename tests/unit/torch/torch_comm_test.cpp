#include "torch_comm.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "torch_names.hpp"

namespace sonde::torch_ops {
namespace {

bool any(uint32_t, uint64_t, const void*) { return true; }
bool only(uint32_t key, uint64_t, const void* want) {
  return key == *static_cast<const uint32_t*>(want);
}

struct Call {
  uint32_t key;
  uint64_t posted_before;
};
bool its_own(uint32_t key, uint64_t index, const void* call) {
  const auto& c = *static_cast<const Call*>(call);
  return key == c.key && index >= c.posted_before;
}

void drain() {
  uint32_t key;
  uint64_t bytes, index;
  while (take_transfer(&any, nullptr, key, bytes, index)) {
  }
  pass_over_untaken();
}

uint64_t unmatched(const char* name) {
  std::pair<const char*, uint64_t> found{name, 0};
  unmatched_transfers(
      [](const char* n, uint64_t count, void* ctx) {
        auto& f = *static_cast<std::pair<const char*, uint64_t>*>(ctx);
        if (n == f.first) f.second = count;
      },
      &found);
  return found.second;
}

TEST(TorchComm, CallAndBackendEventAreOneOperation) {
  EXPECT_EQ(operation_key("c10d::allreduce_"), operation_key("gloo:all_reduce"));
  EXPECT_EQ(operation_key("c10d::allgather_"), operation_key("nccl:all_gather"));
  EXPECT_EQ(operation_key("c10d::recv_"), operation_key("gloo:recv"));
  EXPECT_EQ(operation_key("c10d::barrier"), operation_key("mpi:barrier"));
  EXPECT_NE(operation_key("c10d::allreduce_"), operation_key("gloo:broadcast"));
}

TEST(TorchComm, EventsAreTakenOnceInOrder) {
  drain();
  post_transfer(1, 100, nullptr);
  post_transfer(2, 200, nullptr);
  uint32_t key = 0;
  uint64_t bytes = 0, index = 0;
  ASSERT_TRUE(take_transfer(&any, nullptr, key, bytes, index));
  EXPECT_EQ(key, 1u);
  EXPECT_EQ(bytes, 100u);
  ASSERT_TRUE(take_transfer(&any, nullptr, key, bytes, index));
  EXPECT_EQ(key, 2u);
  EXPECT_FALSE(take_transfer(&any, nullptr, key, bytes, index));
}

TEST(TorchComm, AFullRingDropsRatherThanOverwrites) {
  drain();
  for (uint64_t i = 0; i < 1000; ++i) post_transfer(7, i, nullptr);
  uint32_t key = 0;
  uint64_t bytes = 0, index = 0, n = 0, first = 99;
  while (take_transfer(&any, nullptr, key, bytes, index)) first = n++ == 0 ? bytes : first;
  EXPECT_EQ(n, 256u);
  EXPECT_EQ(first, 0u);
}

// Two threads with calls of different operations waiting: each takes its own, whichever event
// is older, and the other's stays for it.
TEST(TorchComm, AnotherThreadsEventIsLeftForIt) {
  drain();
  post_transfer(1, 100, nullptr);
  post_transfer(2, 200, nullptr);
  uint32_t key = 0, want = 2;
  uint64_t bytes = 0, index = 0;
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes, index));
  EXPECT_EQ(bytes, 200u);
  EXPECT_FALSE(take_transfer(&only, &want, key, bytes, index));
  want = 1;
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes, index));
  EXPECT_EQ(bytes, 100u);
}

// An event no call wants (all_to_all_single's in torch 1.13, which has no c10d call) holds no
// other back: the calls behind it are paired at once, and it is counted as no call's once 128
// more stand behind it. Before, every later call waited behind it and got 0 bytes (a red-team
// find: one all-to-all a step zeroed every DDP all-reduce's bytes).
TEST(TorchComm, AnEventNoCallWantsIsPassedOverAndCounted) {
  drain();
  static const char* kOrphan = "gloo:all_to_all";
  post_transfer(5, 1, kOrphan);
  uint32_t key = 0, want = 6;
  uint64_t bytes = 0, index = 0;
  for (uint64_t i = 0; i < 140; ++i) {
    post_transfer(6, 10 + i, nullptr);
    ASSERT_TRUE(take_transfer(&only, &want, key, bytes, index));
    EXPECT_EQ(bytes, 10 + i);
  }
  EXPECT_EQ(unmatched(kOrphan), 1u);
  EXPECT_FALSE(take_transfer(&any, nullptr, key, bytes, index));  // passed over, not handed on
}

// A call started after an event was posted does not take it: the event is an earlier call's,
// or no call's (a call that failed in the backend would otherwise take the bytes of an earlier
// all_to_all_single).
TEST(TorchComm, ACallTakesNoEventPostedBeforeItStarted) {
  drain();
  static const char* kEarlier = "gloo:all_to_all (earlier)";
  post_transfer(9, 800, kEarlier);
  Call call{9, transfers_posted()};
  uint32_t key = 0;
  uint64_t bytes = 0, index = 0;
  EXPECT_FALSE(take_transfer(&its_own, &call, key, bytes, index));
  post_transfer(9, 64, nullptr);
  ASSERT_TRUE(take_transfer(&its_own, &call, key, bytes, index));
  EXPECT_EQ(bytes, 64u);
  pass_over_untaken();
  EXPECT_EQ(unmatched(kEarlier), 1u);
}

// Two threads post at once: one has claimed its slot and not yet written it when the other's
// event, newer, is written. A taker stops at the gap (its pairing at an operator waits for a
// later one); a thread settling for good first waits for the writer. A CI run's side thread
// ended at that moment and settled its last all_reduce without bytes.
TEST(TorchComm, ASettlingThreadWaitsForAnEventBeingWritten) {
  drain();
  uint64_t claimed = claim_transfer();
  ASSERT_NE(claimed, kFull);
  post_transfer(4, 996, nullptr);
  uint32_t key = 0, want = 4;
  uint64_t bytes = 0, index = 0;
  EXPECT_FALSE(take_transfer(&only, &want, key, bytes, index));
  std::thread writer([claimed] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    publish_transfer(claimed, 3, 10000, nullptr);
  });
  await_posting();
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes, index));
  EXPECT_EQ(bytes, 996u);
  writer.join();
  want = 3;
  ASSERT_TRUE(take_transfer(&only, &want, key, bytes, index));
  EXPECT_EQ(bytes, 10000u);
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
