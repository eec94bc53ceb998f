// The record layouts of the CUPTI releases sonde reads. Offsets were measured with offsetof on
// the published headers (x86-64, CUPTILP64): CUDA 12.1 (CUPTI_API_VERSION 18), 12.6 (24) and
// 13.0 Update 1 (130001); the later 13.x records are placed by the member order of the CUPTI
// 13.4 API reference. Every record version since CUDA 12.0 appended its new fields, so the
// fields sonde reads sit at the same offsets in all of them; the rows still say which records
// each release delivers, and how large they are, because that is what the tests lay out.
#include "gpu/cupti_layouts.hpp"

#include <cstddef>
#include <cstring>

#if __has_include(<cupti_activity.h>)
#include <cupti.h>
#endif

namespace sonde {

namespace {

// CUpti_ActivityKernel9 (CUDA 12.0-12.9): 208 bytes.
constexpr KernelOffsets kKernel9 = {.registers = 6,
                                    .start = 16,
                                    .end = 24,
                                    .device = 40,
                                    .context = 44,
                                    .stream = 48,
                                    .grid = 52,
                                    .block = 64,
                                    .static_shared = 76,
                                    .dynamic_shared = 80,
                                    .correlation = 92,
                                    .name = 104,
                                    .graph_node = 144,
                                    .graph = 156};
// CUpti_ActivityKernel10 (13.0): Kernel9 with isDeviceLaunched appended, 216 bytes. Kernel11
// (13.1, priority), Kernel12 (executionModel) and Kernel13 (13.4, sourceGraphId/NodeId) append
// after it.
constexpr KernelOffsets kKernel10 = kKernel9;

// CUpti_ActivityMemcpy5 (12.0-12.7): 88 bytes; Memcpy6 (12.8, copyCount appended): 96;
// Memcpy7 (13.4, sourceGraphId/NodeId appended).
constexpr CopyOffsets kMemcpy5 = {.copy_kind = 4,
                                  .bytes = 8,
                                  .start = 16,
                                  .end = 24,
                                  .device = 32,
                                  .context = 36,
                                  .stream = 40,
                                  .correlation = 44,
                                  .graph_node = 64,
                                  .graph = 72};
constexpr CopyOffsets kMemcpy6 = kMemcpy5;

// CUpti_ActivityMemset4 (12.0-13.x): 88 bytes; Memset5 (13.4) appends sourceGraphId/NodeId.
constexpr SetOffsets kMemset4 = {.bytes = 8,
                                 .start = 16,
                                 .end = 24,
                                 .device = 32,
                                 .context = 36,
                                 .stream = 40,
                                 .correlation = 44,
                                 .graph_node = 64,
                                 .graph = 72};

// CUpti_ActivityMemcpyPtoP4 (12.0-13.x): 96 bytes; the correlation id follows the source and
// destination device and context ids.
constexpr PeerOffsets kPtoP4 = {.copy = {.copy_kind = 4,
                                         .bytes = 8,
                                         .start = 16,
                                         .end = 24,
                                         .device = 32,
                                         .context = 36,
                                         .stream = 40,
                                         .correlation = 60,
                                         .graph_node = 72,
                                         .graph = 80},
                                .src_device = 44,
                                .src_context = 48,
                                .dst_device = 52,
                                .dst_context = 56};

// Callback ids beyond the 13.0 header's, for releases whose own header was not read: CUDA adds
// a few dozen API calls a minor release.
constexpr uint32_t kCbidHeadroom = 256;

// cuptiGetVersion: 18-28 before CUDA 13 (cupti_version.h's history: 19 is 12.0, 20 12.2, ...,
// 24 12.6, 26 12.8, 27 and 28 12.9; the 12.1 header itself says 18, also 11.8's number), then
// xxyyzz from 13.0 on.
constexpr RecordLayout kLayouts[] = {
    {"12.0-12.1", 18, 19, "Kernel9, Memcpy5, Memset4, MemcpyPtoP4", false, 208, 88, 88, 96,
     kKernel9, kMemcpy5, kMemset4, kPtoP4, 445, 712},
    {"12.2-12.6", 20, 24, "Kernel9, Memcpy5, Memset4, MemcpyPtoP4", false, 208, 88, 88, 96,
     kKernel9, kMemcpy5, kMemset4, kPtoP4, 480, 763},
    {"12.8-12.9", 26, 28, "Kernel9, Memcpy6, Memset4, MemcpyPtoP4", false, 208, 96, 88, 96,
     kKernel9, kMemcpy6, kMemset4, kPtoP4, 523, 807},
    {"13.0", 130000, 130099, "Kernel10, Memcpy6, Memset4, MemcpyPtoP4", false, 216, 96, 88, 96,
     kKernel10, kMemcpy6, kMemset4, kPtoP4, 523, 807},
    {"13.1-13.4", 130100, 130499, "Kernel11-13, Memcpy6-7, Memset4-5, MemcpyPtoP4", true, 216, 96,
     88, 96, kKernel10, kMemcpy6, kMemset4, kPtoP4, 523 + kCbidHeadroom, 807 + kCbidHeadroom},
};

#if __has_include(<cupti_activity.h>)
// The 13.0 row against the header sonde is built with, where it is 13.0's: a wrong offset
// here is a build error, not a misread record.
#define SONDE_AT(T, member, offset) static_assert(offsetof(T, member) == (offset), #T "." #member)
#define SONDE_KERNEL(T, k)                            \
  SONDE_AT(T, registersPerThread, k.registers);       \
  SONDE_AT(T, start, k.start);                        \
  SONDE_AT(T, end, k.end);                            \
  SONDE_AT(T, deviceId, k.device);                    \
  SONDE_AT(T, contextId, k.context);                  \
  SONDE_AT(T, streamId, k.stream);                    \
  SONDE_AT(T, gridX, k.grid);                         \
  SONDE_AT(T, gridZ, k.grid + 8);                     \
  SONDE_AT(T, blockX, k.block);                       \
  SONDE_AT(T, blockZ, k.block + 8);                   \
  SONDE_AT(T, staticSharedMemory, k.static_shared);   \
  SONDE_AT(T, dynamicSharedMemory, k.dynamic_shared); \
  SONDE_AT(T, correlationId, k.correlation);          \
  SONDE_AT(T, name, k.name);                          \
  SONDE_AT(T, graphNodeId, k.graph_node);             \
  SONDE_AT(T, graphId, k.graph)
#define SONDE_COPY(T, c)                     \
  SONDE_AT(T, copyKind, c.copy_kind);        \
  SONDE_AT(T, bytes, c.bytes);               \
  SONDE_AT(T, start, c.start);               \
  SONDE_AT(T, end, c.end);                   \
  SONDE_AT(T, deviceId, c.device);           \
  SONDE_AT(T, contextId, c.context);         \
  SONDE_AT(T, streamId, c.stream);           \
  SONDE_AT(T, correlationId, c.correlation); \
  SONDE_AT(T, graphNodeId, c.graph_node);    \
  SONDE_AT(T, graphId, c.graph)
#if CUPTI_API_VERSION >= 130000 && CUPTI_API_VERSION < 130100
SONDE_KERNEL(CUpti_ActivityKernel10, kKernel10);
SONDE_COPY(CUpti_ActivityMemcpy6, kMemcpy6);
SONDE_COPY(CUpti_ActivityMemcpyPtoP4, kPtoP4.copy);
SONDE_AT(CUpti_ActivityMemcpyPtoP4, srcDeviceId, kPtoP4.src_device);
SONDE_AT(CUpti_ActivityMemcpyPtoP4, srcContextId, kPtoP4.src_context);
SONDE_AT(CUpti_ActivityMemcpyPtoP4, dstDeviceId, kPtoP4.dst_device);
SONDE_AT(CUpti_ActivityMemcpyPtoP4, dstContextId, kPtoP4.dst_context);
SONDE_AT(CUpti_ActivityMemset4, bytes, kMemset4.bytes);
SONDE_AT(CUpti_ActivityMemset4, start, kMemset4.start);
SONDE_AT(CUpti_ActivityMemset4, end, kMemset4.end);
SONDE_AT(CUpti_ActivityMemset4, deviceId, kMemset4.device);
SONDE_AT(CUpti_ActivityMemset4, contextId, kMemset4.context);
SONDE_AT(CUpti_ActivityMemset4, streamId, kMemset4.stream);
SONDE_AT(CUpti_ActivityMemset4, correlationId, kMemset4.correlation);
SONDE_AT(CUpti_ActivityMemset4, graphNodeId, kMemset4.graph_node);
SONDE_AT(CUpti_ActivityMemset4, graphId, kMemset4.graph);
static_assert(sizeof(CUpti_ActivityKernel10) == 216 && sizeof(CUpti_ActivityMemcpy6) == 96 &&
              sizeof(CUpti_ActivityMemset4) == 88 && sizeof(CUpti_ActivityMemcpyPtoP4) == 96);
// sonde's kinds are CUPTI's numbers (two enums: compared as the numbers they are).
static_assert(int(kCuptiMemcpy) == int(CUPTI_ACTIVITY_KIND_MEMCPY) &&
              int(kCuptiMemset) == int(CUPTI_ACTIVITY_KIND_MEMSET) &&
              int(kCuptiKernel) == int(CUPTI_ACTIVITY_KIND_KERNEL) &&
              int(kCuptiConcurrentKernel) == int(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) &&
              int(kCuptiMemcpy2) == int(CUPTI_ACTIVITY_KIND_MEMCPY2));
static_assert(CUPTI_RUNTIME_TRACE_CBID_SIZE == 523 && CUPTI_DRIVER_TRACE_CBID_SIZE == 807);
#endif
#undef SONDE_KERNEL
#undef SONDE_COPY
#undef SONDE_AT
#endif

template <class T>
T field(const uint8_t* record, uint16_t offset) {
  T value;
  std::memcpy(&value, record + offset, sizeof value);
  return value;
}

}  // namespace

const RecordLayout* record_layout(uint32_t version) {
  for (const RecordLayout& l : kLayouts) {
    if (version >= l.first && version <= l.last) return &l;
  }
  return nullptr;
}

int cupti_major(uint32_t version) {
  if (version >= 130000 && version < 140000) return 13;
  if (version >= 18 && version <= 28) return 12;
  return 0;
}

bool read_activity(const RecordLayout& layout, const void* record, ActivityFields& out) {
  const auto* r = static_cast<const uint8_t*>(record);
  out = ActivityFields{};
  out.kind = field<uint32_t>(r, 0);
  switch (out.kind) {
    case kCuptiKernel:
    case kCuptiConcurrentKernel: {
      const KernelOffsets& k = layout.kernel;
      out.registers = field<uint16_t>(r, k.registers);
      out.start = field<uint64_t>(r, k.start);
      out.end = field<uint64_t>(r, k.end);
      out.device = field<uint32_t>(r, k.device);
      out.context = field<uint32_t>(r, k.context);
      out.stream = field<uint32_t>(r, k.stream);
      for (int i = 0; i < 3; ++i) {
        out.grid[i] = field<int32_t>(r, uint16_t(k.grid + 4 * i));
        out.block[i] = field<int32_t>(r, uint16_t(k.block + 4 * i));
      }
      out.shared_bytes = field<int32_t>(r, k.static_shared) + field<int32_t>(r, k.dynamic_shared);
      out.correlation = field<uint32_t>(r, k.correlation);
      out.name = field<const char*>(r, k.name);
      out.graph_node = field<uint64_t>(r, k.graph_node);
      out.graph = field<uint32_t>(r, k.graph);
      return true;
    }
    case kCuptiMemcpy:
    case kCuptiMemcpy2: {
      const CopyOffsets& c = out.kind == kCuptiMemcpy ? layout.memcpy : layout.peer.copy;
      out.copy_kind = field<uint8_t>(r, c.copy_kind);
      out.bytes = field<uint64_t>(r, c.bytes);
      out.start = field<uint64_t>(r, c.start);
      out.end = field<uint64_t>(r, c.end);
      out.device = field<uint32_t>(r, c.device);
      out.context = field<uint32_t>(r, c.context);
      out.stream = field<uint32_t>(r, c.stream);
      out.correlation = field<uint32_t>(r, c.correlation);
      out.graph_node = field<uint64_t>(r, c.graph_node);
      out.graph = field<uint32_t>(r, c.graph);
      if (out.kind == kCuptiMemcpy2) {
        out.src_device = field<uint32_t>(r, layout.peer.src_device);
        out.dst_device = field<uint32_t>(r, layout.peer.dst_device);
      }
      return true;
    }
    case kCuptiMemset: {
      const SetOffsets& s = layout.memset;
      out.bytes = field<uint64_t>(r, s.bytes);
      out.start = field<uint64_t>(r, s.start);
      out.end = field<uint64_t>(r, s.end);
      out.device = field<uint32_t>(r, s.device);
      out.context = field<uint32_t>(r, s.context);
      out.stream = field<uint32_t>(r, s.stream);
      out.correlation = field<uint32_t>(r, s.correlation);
      out.graph_node = field<uint64_t>(r, s.graph_node);
      out.graph = field<uint32_t>(r, s.graph);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace sonde
