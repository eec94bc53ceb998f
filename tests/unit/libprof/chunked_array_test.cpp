#include "core/chunked_array.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sonde {
namespace {

// 4 elements per chunk, 8 chunks: boundaries and the capacity are cheap to reach.
using Small = ChunkedArray<uint64_t, 2, 8>;

uint32_t append(Small& a, uint64_t v) {
  uint32_t i = a.reserve();
  if (i != Small::kFull) {
    a[i] = v;
    a.publish(i);
  }
  return i;
}

TEST(ChunkedArray, ReserveGivesConsecutiveSlotsAcrossChunks) {
  Small a;
  EXPECT_EQ(a.size_acquire(), 0u);
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(append(a, 100 + i), i);
    EXPECT_EQ(a.size_acquire(), i + 1);
    EXPECT_EQ(a.size_owner(), i + 1);
  }
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(a[i], 100 + i) << i;
}

TEST(ChunkedArray, ReservedSlotIsDefaultConstructedAndInvisibleUntilPublished) {
  Small a;
  append(a, 1);
  uint32_t i = a.reserve();
  EXPECT_EQ(i, 1u);
  EXPECT_EQ(a[i], 0u);
  EXPECT_EQ(a.size_acquire(), 1u);
  // Reserving again without publishing hands out the same slot.
  EXPECT_EQ(a.reserve(), 1u);
  a[i] = 7;
  a.publish(i);
  EXPECT_EQ(a.size_acquire(), 2u);
  EXPECT_EQ(a[1], 7u);
}

TEST(ChunkedArray, ElementsKeepTheirAddressAsItGrows) {
  Small a;
  std::vector<const uint64_t*> addresses;
  for (uint32_t i = 0; i < Small::kCapacity; ++i) {
    append(a, i);
    addresses.push_back(&a[i]);
  }
  for (uint32_t i = 0; i < Small::kCapacity; ++i) {
    EXPECT_EQ(&a[i], addresses[i]) << i;
    EXPECT_EQ(a[i], i);
  }
}

TEST(ChunkedArray, FullAtCapacity) {
  Small a;
  for (uint32_t i = 0; i < Small::kCapacity; ++i) ASSERT_EQ(append(a, i), i);
  EXPECT_EQ(a.reserve(), Small::kFull);
  EXPECT_EQ(a.size_acquire(), Small::kCapacity);
  EXPECT_EQ(a[Small::kCapacity - 1], Small::kCapacity - 1);
}

TEST(ChunkedArray, ReaderSeesOnlyInitialisedElementsWhileWriterAppends) {
  struct Item {
    uint64_t value = 0;
    uint64_t check = 0;  // ~value once written
  };
  constexpr uint32_t kCount = 100000;
  ChunkedArray<Item> a;  // default geometry: 1024 per chunk, ~98 chunks allocated on the way
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0}, reads{0};
  std::thread reader([&] {
    uint32_t seen = 0;
    while (!done.load(std::memory_order_acquire) || seen < a.size_acquire()) {
      uint32_t n = a.size_acquire();
      EXPECT_GE(n, seen);  // the size never goes back
      for (uint32_t i = seen; i < n; ++i) {
        const Item& it = a[i];
        if (it.value != uint64_t(i) * 3 + 1 || it.check != ~it.value) bad.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
      // Re-reading the newest element is the most likely to race with the writer.
      if (n > 0) {
        const Item& last = a[n - 1];
        if (last.check != ~last.value) bad.fetch_add(1);
      }
      seen = n;
    }
  });
  for (uint32_t i = 0; i < kCount; ++i) {
    uint32_t slot = a.reserve();
    ASSERT_EQ(slot, i);
    a[slot].value = uint64_t(i) * 3 + 1;
    a[slot].check = ~a[slot].value;
    a.publish(slot);
  }
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(reads.load(), kCount);
  EXPECT_EQ(a.size_acquire(), kCount);
}

TEST(ChunkedArray, BumpAddsWithoutLosingTheOldValue) {
  std::atomic<uint64_t> c{5};
  bump(c, 7);
  bump(c, 0);
  EXPECT_EQ(c.load(), 12u);
}

}  // namespace
}  // namespace sonde
