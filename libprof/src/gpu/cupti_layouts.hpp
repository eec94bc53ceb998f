// Where the fields sonde reads sit in CUPTI's activity records, per CUPTI version. CUPTI fills
// its buffers with the newest record version its own release defines (CUpti_ActivityKernel9 in
// CUDA 12, Kernel10 in 13.0, ...), whatever header the client was built with, so sonde reads
// them by the loaded library's version, chosen once at start, rather than by casting to the
// structs of the header it was compiled against. Needs no CUPTI header (the unit tests build
// without one); cupti_layouts_check.cpp holds the 13.0 row to the installed header.
#pragma once

#include <cstdint>

namespace sonde {

// CUpti_ActivityKind values sonde reads (cupti_activity.h; stable across versions).
enum CuptiKind : uint32_t {
  kCuptiMemcpy = 1,
  kCuptiMemset = 2,
  kCuptiKernel = 3,
  kCuptiConcurrentKernel = 10,
  kCuptiMemcpy2 = 22,  // peer-to-peer copies (CUpti_ActivityMemcpyPtoP)
};

// Byte offsets inside one record. grid and block: X, Y, Z as three consecutive int32.
struct KernelOffsets {
  uint16_t registers, start, end, device, context, stream, grid, block, static_shared,
      dynamic_shared, correlation, name, graph_node, graph;
};
struct CopyOffsets {
  uint16_t copy_kind, bytes, start, end, device, context, stream, correlation, graph_node, graph;
};
struct SetOffsets {
  uint16_t bytes, start, end, device, context, stream, correlation, graph_node, graph;
};
struct PeerOffsets {
  CopyOffsets copy;
  uint16_t src_device, src_context, dst_device, dst_context;
};

// The records one range of CUPTI versions delivers.
struct RecordLayout {
  const char* cuda;      // "12.2-12.6", for notes and run_info
  uint32_t first, last;  // cuptiGetVersion's answers this row covers
  const char* records;   // the record versions, as cupti_activity.h names them
  bool prefix_only;      // newer records, read by the documented common prefix
  uint16_t kernel_size, memcpy_size, memset_size, peer_size;  // sizeof each (at least)
  KernelOffsets kernel;
  CopyOffsets memcpy;
  SetOffsets memset;
  PeerOffsets peer;
  // CUPTI_RUNTIME_TRACE_CBID_SIZE and CUPTI_DRIVER_TRACE_CBID_SIZE of that release (an upper
  // bound where the release's own header was not read): callback ids are append-only.
  uint32_t runtime_cbids, driver_cbids;
};

// The row for `version` (cuptiGetVersion); nullptr for a version sonde does not know, whose
// records it must not read.
const RecordLayout* record_layout(uint32_t version);
// The CUDA major a CUPTI version belongs to (12 for 18-28, 13 for 130000-139999), 0 if unknown.
int cupti_major(uint32_t version);

// One record as sonde uses it, whatever its version.
struct ActivityFields {
  uint32_t kind = 0;  // CuptiKind
  uint8_t copy_kind = 0;
  uint32_t correlation = 0, device = 0, context = 0, stream = 0;
  uint64_t start = 0, end = 0, bytes = 0;
  const char* name = nullptr;  // kernels; owned by CUPTI
  int32_t grid[3] = {}, block[3] = {};
  int32_t registers = 0, shared_bytes = 0;
  uint64_t graph_node = 0;
  uint32_t graph = 0;
  uint32_t src_device = 0, dst_device = 0;  // peer copies
};

// Reads `record` (a CUpti_Activity* from cuptiActivityGetNextRecord) by `layout`; false for a
// kind sonde does not read.
bool read_activity(const RecordLayout& layout, const void* record, ActivityFields& out);

}  // namespace sonde
