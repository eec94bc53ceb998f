// FLOP and byte models of the cuDNN legacy entry points sonde intercepts (formulas in
// docs/gpu.md). They read tensor and filter dimensions, already queried from the descriptors,
// so they are pure functions unit-tested without libcudnn.
//
// A convolution is counted as the implicit GEMMs it is, one per group, as the oneDNN model does
// (onednn_models.hpp): every output point (n, k, spatial) takes C/G x prod(filter spatial)
// multiply-adds of 2 FLOPs; bias and activation are not counted (benchdnn's convention). Bytes are
// the logical size of each tensor the call reads or writes, the output read first when beta != 0.
// Pooling, activation, batch norm and softmax record bytes only.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::cudnn {

constexpr int kMaxDims = 8;  // CUDNN_DIM_MAX

// What a tensor or filter descriptor holds: dims in cuDNN's logical order (N, C, spatial... for
// tensors; K, C/G, spatial... for filters, whatever the memory format). nd 0: unknown.
struct Dims {
  int nd = 0;
  int64_t d[kMaxDims] = {};
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
};

constexpr int64_t element_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64:
    case CUDNN_DATA_COMPLEX_FP32:
      return 8;
    case CUDNN_DATA_COMPLEX_FP64:
      return 16;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_UINT32:
      return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
      return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_BOOLEAN:
    case CUDNN_DATA_FP8_E4M3:
    case CUDNN_DATA_FP8_E5M2:
    case CUDNN_DATA_FP8_E8M0:
      return 1;
    default:
      return 0;  // vectorised and sub-byte types: traffic not modelled
  }
}

constexpr DType dtype_of(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return DType::kF32;
    case CUDNN_DATA_DOUBLE:
      return DType::kF64;
    case CUDNN_DATA_HALF:
      return DType::kF16;
    case CUDNN_DATA_BFLOAT16:
      return DType::kBF16;
    default:
      return DType::kNone;
  }
}

// Product of dims [from, nd); 0 when unknown.
constexpr int64_t product(const Dims& t, int from) {
  if (t.nd <= from) return t.nd == from && from > 0 ? 1 : 0;
  int64_t p = 1;
  for (int i = from; i < t.nd; ++i) p *= t.d[i] > 0 ? t.d[i] : 0;
  return p;
}
constexpr int64_t elements(const Dims& t) { return t.nd > 0 ? product(t, 0) : 0; }
constexpr uint64_t bytes_of(const Dims& t) { return uint64_t(elements(t) * element_size(t.type)); }

enum class ConvPass : uint8_t { kForward, kBackwardData, kBackwardFilter };

// `x` and `y` are the convolution's input and output in the forward sense (for backward data, dx
// and dy; for backward filter, x and dy); `w` the filter; `groups` the descriptor's group count.
// `extra_read`: other tensors the call reads (the bias-activation form's z and bias);
// `out_read`: beta != 0, so the pass reads its output before writing it.
struct ConvCall {
  Dims x, w, y;
  int64_t groups = 1;
  ConvPass pass = ConvPass::kForward;
  uint64_t extra_read = 0;
  bool out_read = false;
};

// FLOPs = 2 * N * K * prod(y spatial) * (C/G) * prod(w spatial), with C/G = w.d[1]. As GEMMs
// (batch = G): forward M = N*prod(y spatial), N = K/G, K = C/G*prod(w spatial); backward data
// M, C/G*prod(w spatial), K/G; backward filter K/G, C/G*prod(w spatial), M. Same FLOPs each.
// Bytes: forward reads x, w, writes y; backward data reads w, dy, writes dx; backward filter
// reads x, dy, writes dw.
constexpr CallCost convolution(const ConvCall& c) {
  CallCost r;
  uint64_t x = bytes_of(c.x), w = bytes_of(c.w), y = bytes_of(c.y), read = 0, written = 0;
  switch (c.pass) {
    case ConvPass::kForward:
      read = x + w, written = y;
      break;
    case ConvPass::kBackwardData:
      read = w + y, written = x;
      break;
    case ConvPass::kBackwardFilter:
      read = x + y, written = w;
      break;
  }
  r.bytes = read + c.extra_read + written * (c.out_read ? 2 : 1);
  if (c.x.nd < 3 || c.w.nd != c.x.nd || c.y.nd != c.x.nd) return r;
  int64_t g = c.groups > 0 ? c.groups : 1;
  int64_t m = c.y.d[0] * product(c.y, 2);
  int64_t kg = c.w.d[0] / g;                // output channels per group
  int64_t kk = c.w.d[1] * product(c.w, 2);  // input channels per group x filter points
  r.flops = 2 * uint64_t(m) * uint64_t(kg) * uint64_t(kk) * uint64_t(g);
  DType t = dtype_of(c.x.type);
  switch (c.pass) {
    case ConvPass::kForward:
      r.shape = GemmShape{m, kg, kk, g, 'N', 'N', t};
      break;
    case ConvPass::kBackwardData:
      r.shape = GemmShape{m, kk, kg, g, 'N', 'N', t};
      break;
    case ConvPass::kBackwardFilter:
      r.shape = GemmShape{kg, kk, m, g, 'N', 'N', t};
      break;
  }
  return r;
}

// Everything else: the bytes of the tensors read and written, no FLOPs.
constexpr CallCost data_movement(uint64_t read, uint64_t written, bool out_read) {
  CallCost r;
  r.bytes = read + written * (out_read ? 2 : 1);
  return r;
}

// alpha and beta point to a double for double data, to a float otherwise (cuDNN's rule). Without
// a pointer the model cannot tell, and counts the tensor as read.
inline bool nonzero_scale(const void* p, cudnnDataType_t data) {
  if (p == nullptr) return true;
  return data == CUDNN_DATA_DOUBLE ? *static_cast<const double*>(p) != 0
                                   : *static_cast<const float*>(p) != 0;
}

}  // namespace sonde::cudnn
