// CUPTI's activity records as each release lays them out, fed through sonde's reader. The
// fixtures below are written from the published headers, not from sonde's table: offsets
// measured with offsetof on each header (x86-64), so a wrong row in cupti_layouts.cpp reads a
// marker byte instead of the field and fails here. Bytes sonde does not read are 0xA5.
#include "gpu/cupti_layouts.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace sonde {
namespace {

// One release's records: where each field lies, and how long each record is.
struct Fixture {
  const char* source;  // the header the offsets were measured on
  uint32_t version;    // what that release's cuptiGetVersion answers
  size_t kernel_size, memcpy_size, memset_size, peer_size;
  // kernel
  size_t k_registers, k_start, k_end, k_device, k_context, k_stream, k_grid, k_block,
      k_static_shared, k_dynamic_shared, k_correlation, k_name, k_graph_node, k_graph;
  // memcpy (and the first half of a peer copy)
  size_t c_copy_kind, c_bytes, c_start, c_end, c_device, c_context, c_stream, c_correlation,
      c_graph_node, c_graph;
  // memset
  size_t s_bytes, s_start, s_end, s_device, s_context, s_stream, s_correlation, s_graph_node,
      s_graph;
  // peer copy (CUpti_ActivityMemcpyPtoP4)
  size_t p_correlation, p_src_device, p_dst_device, p_graph_node, p_graph;
};

// The kernel, memcpy, memset and peer-copy fields sonde reads have kept their offsets since
// CUDA 12.0; what differs between releases is the record versions and their lengths.
// One row a field group: sizes (kernel, memcpy, memset, peer); kernel; memcpy; memset; peer.
// clang-format off
constexpr Fixture kFixtures[] = {
    // heiner/cuda@439465d include/cupti_activity.h (CUDA 12.1, CUPTI_API_VERSION 18):
    // CUpti_ActivityKernel9 208 bytes, Memcpy5 88, Memset4 88, MemcpyPtoP4 96.
    {"CUDA 12.1 header", 18,
     208, 88, 88, 96,
     6, 16, 24, 40, 44, 48, 52, 64, 76, 80, 92, 104, 144, 156,
     4, 8, 16, 24, 32, 36, 40, 44, 64, 72,
     8, 16, 24, 32, 36, 40, 44, 64, 72,
     60, 44, 52, 72, 80},
    // zspace/system.cuda-12.6 extras/CUPTI/include/cupti_activity.h (CUDA 12.6, version 24):
    // the same records and lengths as 12.1.
    {"CUDA 12.6 header", 24,
     208, 88, 88, 96,
     6, 16, 24, 40, 44, 48, 52, 64, 76, 80, 92, 104, 144, 156,
     4, 8, 16, 24, 32, 36, 40, 44, 64, 72,
     8, 16, 24, 32, 36, 40, 44, 64, 72,
     60, 44, 52, 72, 80},
    // CUDA 12.8 (version 26): CUPTI's release notes replace Memcpy5 by Memcpy6 (copyCount
    // appended, 96 bytes as in the 13.0 header); the kernel record stays Kernel9.
    {"CUDA 12.8 release notes + 13.0 Memcpy6", 26,
     208, 96, 88, 96,
     6, 16, 24, 40, 44, 48, 52, 64, 76, 80, 92, 104, 144, 156,
     4, 8, 16, 24, 32, 36, 40, 44, 64, 72,
     8, 16, 24, 32, 36, 40, 44, 64, 72,
     60, 44, 52, 72, 80},
    // /usr/local/cuda/include/cupti_activity.h (CUDA 13.0 Update 1, version 130001):
    // CUpti_ActivityKernel10 216 bytes (isDeviceLaunched appended), Memcpy6 96, Memset4 88.
    {"CUDA 13.0 header", 130001,
     216, 96, 88, 96,
     6, 16, 24, 40, 44, 48, 52, 64, 76, 80, 92, 104, 144, 156,
     4, 8, 16, 24, 32, 36, 40, 44, 64, 72,
     8, 16, 24, 32, 36, 40, 44, 64, 72,
     60, 44, 52, 72, 80},
    // CUPTI 13.4 API reference (member order of CUpti_ActivityKernel13, Memcpy7, Memset5):
    // priority, executionModel, sourceGraphId and sourceGraphNodeId appended after 13.0's
    // members, so records are longer (240, 112, 104 bytes by that order) with the same prefix.
    {"CUPTI 13.4 API reference", 130400,
     240, 112, 104, 96,
     6, 16, 24, 40, 44, 48, 52, 64, 76, 80, 92, 104, 144, 156,
     4, 8, 16, 24, 32, 36, 40, 44, 64, 72,
     8, 16, 24, 32, 36, 40, 44, 64, 72,
     60, 44, 52, 72, 80},
};
// clang-format on

class Record {
 public:
  explicit Record(size_t size) : bytes_(size + 8, 0xA5) {}
  template <class T>
  void put(size_t offset, T value) {
    ASSERT_LE(offset + sizeof value, bytes_.size() - 8) << "field past the record's end";
    std::memcpy(bytes_.data() + offset, &value, sizeof value);
  }
  const void* data() const { return bytes_.data(); }

 private:
  std::vector<uint8_t> bytes_;  // 8 more: a read past the end reads markers, not the heap
};

class CuptiLayouts : public ::testing::TestWithParam<Fixture> {};

TEST_P(CuptiLayouts, KernelRecordIsReadField_by_field) {
  const Fixture& f = GetParam();
  const RecordLayout* layout = record_layout(f.version);
  ASSERT_NE(layout, nullptr) << f.source;
  static const char kName[] = "_Z6matmulPfS_S_i";
  Record r(f.kernel_size);
  r.put<uint32_t>(0, kCuptiConcurrentKernel);
  r.put<uint16_t>(f.k_registers, 40);
  r.put<uint64_t>(f.k_start, 1'000'001);
  r.put<uint64_t>(f.k_end, 1'000'777);
  r.put<uint32_t>(f.k_device, 3);
  r.put<uint32_t>(f.k_context, 11);
  r.put<uint32_t>(f.k_stream, 7);
  for (int i = 0; i < 3; ++i) {
    r.put<int32_t>(f.k_grid + 4 * i, 100 + i);
    r.put<int32_t>(f.k_block + 4 * i, 200 + i);
  }
  r.put<int32_t>(f.k_static_shared, 1024);
  r.put<int32_t>(f.k_dynamic_shared, 4096);
  r.put<uint32_t>(f.k_correlation, 4242);
  r.put<const char*>(f.k_name, kName);
  r.put<uint64_t>(f.k_graph_node, 0x1122334455ull);
  r.put<uint32_t>(f.k_graph, 9);

  ActivityFields out;
  ASSERT_TRUE(read_activity(*layout, r.data(), out)) << f.source;
  EXPECT_EQ(out.kind, kCuptiConcurrentKernel);
  EXPECT_EQ(out.registers, 40);
  EXPECT_EQ(out.start, 1'000'001u);
  EXPECT_EQ(out.end, 1'000'777u);
  EXPECT_EQ(out.device, 3u);
  EXPECT_EQ(out.context, 11u);
  EXPECT_EQ(out.stream, 7u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out.grid[i], 100 + i);
    EXPECT_EQ(out.block[i], 200 + i);
  }
  EXPECT_EQ(out.shared_bytes, 1024 + 4096);
  EXPECT_EQ(out.correlation, 4242u);
  EXPECT_EQ(out.name, kName);
  EXPECT_EQ(out.graph_node, 0x1122334455ull);
  EXPECT_EQ(out.graph, 9u);
}

TEST_P(CuptiLayouts, MemcpyRecordIsReadField_by_field) {
  const Fixture& f = GetParam();
  const RecordLayout* layout = record_layout(f.version);
  ASSERT_NE(layout, nullptr);
  Record r(f.memcpy_size);
  r.put<uint32_t>(0, kCuptiMemcpy);
  r.put<uint8_t>(f.c_copy_kind, 1);  // CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
  r.put<uint64_t>(f.c_bytes, 1ull << 20);
  r.put<uint64_t>(f.c_start, 5'000);
  r.put<uint64_t>(f.c_end, 6'000);
  r.put<uint32_t>(f.c_device, 2);
  r.put<uint32_t>(f.c_context, 12);
  r.put<uint32_t>(f.c_stream, 13);
  r.put<uint32_t>(f.c_correlation, 77);
  r.put<uint64_t>(f.c_graph_node, 5);
  r.put<uint32_t>(f.c_graph, 6);
  ActivityFields out;
  ASSERT_TRUE(read_activity(*layout, r.data(), out));
  EXPECT_EQ(out.kind, kCuptiMemcpy);
  EXPECT_EQ(out.copy_kind, 1);
  EXPECT_EQ(out.bytes, 1ull << 20);
  EXPECT_EQ(out.start, 5'000u);
  EXPECT_EQ(out.end, 6'000u);
  EXPECT_EQ(out.device, 2u);
  EXPECT_EQ(out.context, 12u);
  EXPECT_EQ(out.stream, 13u);
  EXPECT_EQ(out.correlation, 77u);
  EXPECT_EQ(out.graph_node, 5u);
  EXPECT_EQ(out.graph, 6u);
}

TEST_P(CuptiLayouts, MemsetRecordIsReadField_by_field) {
  const Fixture& f = GetParam();
  const RecordLayout* layout = record_layout(f.version);
  ASSERT_NE(layout, nullptr);
  Record r(f.memset_size);
  r.put<uint32_t>(0, kCuptiMemset);
  r.put<uint32_t>(4, 0xFF);  // the value set: not a field sonde reads
  r.put<uint64_t>(f.s_bytes, 512);
  r.put<uint64_t>(f.s_start, 8'000);
  r.put<uint64_t>(f.s_end, 8'500);
  r.put<uint32_t>(f.s_device, 1);
  r.put<uint32_t>(f.s_context, 21);
  r.put<uint32_t>(f.s_stream, 22);
  r.put<uint32_t>(f.s_correlation, 88);
  r.put<uint64_t>(f.s_graph_node, 23);
  r.put<uint32_t>(f.s_graph, 24);
  ActivityFields out;
  ASSERT_TRUE(read_activity(*layout, r.data(), out));
  EXPECT_EQ(out.kind, kCuptiMemset);
  EXPECT_EQ(out.bytes, 512u);
  EXPECT_EQ(out.start, 8'000u);
  EXPECT_EQ(out.end, 8'500u);
  EXPECT_EQ(out.device, 1u);
  EXPECT_EQ(out.context, 21u);
  EXPECT_EQ(out.stream, 22u);
  EXPECT_EQ(out.correlation, 88u);
  EXPECT_EQ(out.graph_node, 23u);
  EXPECT_EQ(out.graph, 24u);
}

TEST_P(CuptiLayouts, PeerCopyRecordIsReadField_by_field) {
  const Fixture& f = GetParam();
  const RecordLayout* layout = record_layout(f.version);
  ASSERT_NE(layout, nullptr);
  Record r(f.peer_size);
  r.put<uint32_t>(0, kCuptiMemcpy2);
  r.put<uint8_t>(f.c_copy_kind, 10);  // CUPTI_ACTIVITY_MEMCPY_KIND_PTOP
  r.put<uint64_t>(f.c_bytes, 1ull << 24);
  r.put<uint64_t>(f.c_start, 9'000);
  r.put<uint64_t>(f.c_end, 9'900);
  r.put<uint32_t>(f.c_device, 0);
  r.put<uint32_t>(f.c_context, 31);
  r.put<uint32_t>(f.c_stream, 32);
  r.put<uint32_t>(f.p_src_device, 0);
  r.put<uint32_t>(f.p_dst_device, 1);
  r.put<uint32_t>(f.p_correlation, 99);
  r.put<uint64_t>(f.p_graph_node, 33);
  r.put<uint32_t>(f.p_graph, 34);
  ActivityFields out;
  ASSERT_TRUE(read_activity(*layout, r.data(), out));
  EXPECT_EQ(out.kind, kCuptiMemcpy2);
  EXPECT_EQ(out.copy_kind, 10);
  EXPECT_EQ(out.bytes, 1ull << 24);
  EXPECT_EQ(out.start, 9'000u);
  EXPECT_EQ(out.end, 9'900u);
  EXPECT_EQ(out.context, 31u);
  EXPECT_EQ(out.stream, 32u);
  EXPECT_EQ(out.src_device, 0u);
  EXPECT_EQ(out.dst_device, 1u);
  EXPECT_EQ(out.correlation, 99u);
  EXPECT_EQ(out.graph_node, 33u);
  EXPECT_EQ(out.graph, 34u);
}

TEST_P(CuptiLayouts, RowKnowsItsRecordsAndCallbackBounds) {
  const Fixture& f = GetParam();
  const RecordLayout* layout = record_layout(f.version);
  ASSERT_NE(layout, nullptr);
  // A row never claims a record shorter than the fields it reads (13.4's are longer still).
  EXPECT_LE(layout->kernel_size, f.kernel_size);
  EXPECT_LE(layout->memcpy_size, f.memcpy_size);
  EXPECT_LE(layout->memset_size, f.memset_size);
  EXPECT_EQ(layout->peer_size, f.peer_size);
  EXPECT_LE(layout->kernel.graph + 4u, layout->kernel_size);
  EXPECT_LE(layout->memcpy.graph + 4u, layout->memcpy_size);
  EXPECT_LE(layout->memset.graph + 4u, layout->memset_size);
  EXPECT_LE(layout->peer.copy.graph + 4u, layout->peer_size);
  EXPECT_EQ(cupti_major(f.version), f.version < 130000 ? 12 : 13);
}

INSTANTIATE_TEST_SUITE_P(Releases, CuptiLayouts, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           return "v" + std::to_string(info.param.version);
                         });

TEST(CuptiLayoutsChoice, EachReleaseGetsItsRecords) {
  EXPECT_STREQ(record_layout(24)->records, "Kernel9, Memcpy5, Memset4, MemcpyPtoP4");
  EXPECT_EQ(record_layout(24)->memcpy_size, 88);
  EXPECT_EQ(record_layout(27)->memcpy_size, 96);  // 12.9: Memcpy6
  EXPECT_EQ(record_layout(130000)->kernel_size, 216);
  EXPECT_FALSE(record_layout(130001)->prefix_only);
  EXPECT_TRUE(record_layout(130200)->prefix_only);
}

TEST(CuptiLayoutsChoice, CallbackIdsAreBoundedByTheLoadedRelease) {
  // CUPTI_RUNTIME/DRIVER_TRACE_CBID_SIZE of the 12.1, 12.6 and 13.0 headers.
  EXPECT_EQ(record_layout(18)->runtime_cbids, 445u);
  EXPECT_EQ(record_layout(18)->driver_cbids, 712u);
  EXPECT_EQ(record_layout(24)->runtime_cbids, 480u);
  EXPECT_EQ(record_layout(24)->driver_cbids, 763u);
  EXPECT_EQ(record_layout(130001)->runtime_cbids, 523u);
  EXPECT_EQ(record_layout(130001)->driver_cbids, 807u);
  // Releases after 13.0 add calls: their ids reach past 13.0's table.
  EXPECT_GT(record_layout(130300)->runtime_cbids, 523u);
  EXPECT_GT(record_layout(130300)->driver_cbids, 807u);
}

TEST(CuptiLayoutsChoice, UnknownReleasesAreNotRead) {
  // CUDA 11 (17 and before), the unreleased 25, anything between 12.9 and 13.0, a 13.x after
  // the last documented one, and CUDA 14: no row, so no record is read by a guessed layout.
  for (uint32_t v : {0u, 12u, 17u, 25u, 29u, 129999u, 130500u, 140000u}) {
    EXPECT_EQ(record_layout(v), nullptr) << v;
  }
  EXPECT_EQ(cupti_major(17), 0);
  EXPECT_EQ(cupti_major(140000), 0);
}

TEST(CuptiLayoutsChoice, OtherKindsAreNotRead) {
  Record r(64);
  r.put<uint32_t>(0, 4);  // CUPTI_ACTIVITY_KIND_DRIVER
  ActivityFields out;
  EXPECT_FALSE(read_activity(*record_layout(130001), r.data(), out));
}

}  // namespace
}  // namespace sonde
