// FLOP and byte models of oneDNN primitives (formulas in docs/cost-models.md). They read only
// memory descriptors (oneDNN 2.x: plain structs), so they are pure functions of the shapes and
// are unit-tested without libdnnl.
//
// FLOPs follow benchdnn, oneDNN's own benchmark: a multiply-add is 2, bias and post-ops are not
// counted. Bytes are the logical size of every tensor the primitive reads or writes (padding of
// blocked layouts, scratchpad and workspace left out).
#pragma once

#include <oneapi/dnnl/dnnl_types.h>

#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::onednn {

// Direction of a primitive, from its prop_kind; kNone for kinds that have none (reorder).
enum class Dir : uint8_t { kNone, kFwd, kBwd, kBwdData, kBwdWeights, kBwdBias, kCount };

inline Dir direction(dnnl_prop_kind_t p) {
  switch (p) {
    case dnnl_forward_training:
    case dnnl_forward_inference:
      return Dir::kFwd;
    case dnnl_backward:
      return Dir::kBwd;
    case dnnl_backward_data:
      return Dir::kBwdData;
    case dnnl_backward_weights:
      return Dir::kBwdWeights;
    case dnnl_backward_bias:
      return Dir::kBwdBias;
    default:
      return Dir::kNone;
  }
}

constexpr int64_t element_size(dnnl_data_type_t t) {
  switch (t) {
    case dnnl_f16:
    case dnnl_bf16:
      return 2;
    case dnnl_f32:
    case dnnl_s32:
      return 4;
    case dnnl_s8:
    case dnnl_u8:
      return 1;
    default:
      return 0;
  }
}

// Only f32 has a sonde DType; other types keep FLOPs and bytes but record no shape.
constexpr DType dtype_of(dnnl_data_type_t t) { return t == dnnl_f32 ? DType::kF32 : DType::kNone; }

inline bool present(const dnnl_memory_desc_t* md) { return md != nullptr && md->ndims > 0; }

// Product of dims [from, to); 0 for a runtime (negative) or absent dimension.
inline int64_t dims_product(const dnnl_memory_desc_t* md, int from, int to) {
  if (!present(md)) return 0;
  int64_t p = 1;
  for (int i = from; i < to && i < md->ndims; ++i) p *= md->dims[i] > 0 ? md->dims[i] : 0;
  return p;
}
inline int64_t elements(const dnnl_memory_desc_t* md) {
  return present(md) ? dims_product(md, 0, md->ndims) : 0;
}
inline int64_t dim(const dnnl_memory_desc_t* md, int i) {
  return present(md) && i < md->ndims && md->dims[i] > 0 ? md->dims[i] : 0;
}
inline uint64_t bytes_of(const dnnl_memory_desc_t* md) {
  return present(md) ? uint64_t(elements(md) * element_size(md->data_type)) : 0;
}

// The tensors of one primitive in data roles: for a backward pass `src`, `weights`, `dst` are
// the diff tensors where the pass computes or reads those (conv backward data: diff_src,
// weights, diff_dst). `bytes` is the sum over every tensor the descriptor names.
struct Tensors {
  const dnnl_memory_desc_t* src = nullptr;
  const dnnl_memory_desc_t* weights = nullptr;
  const dnnl_memory_desc_t* dst = nullptr;
  uint64_t bytes = 0;
};

// Convolution seen as implicit GEMMs, one per group: every output point (n, oc, o) takes
// (ic/g)*ksp multiply-adds. For deconvolution the roles of src and dst swap.
struct ConvGeometry {
  int64_t n, ic, oc, groups, in_spatial, out_spatial, kernel_spatial;
};

inline ConvGeometry conv_geometry(const Tensors& t) {
  ConvGeometry g{};
  const dnnl_memory_desc_t* w = t.weights;
  int nd = present(t.src) ? t.src->ndims : 0;
  bool grouped = present(w) && w->ndims == nd + 1;
  g.n = dim(t.src, 0);
  g.ic = dim(t.src, 1);
  g.oc = dim(t.dst, 1);
  g.groups = grouped ? dim(w, 0) : 1;
  g.in_spatial = dims_product(t.src, 2, nd);
  g.out_spatial = dims_product(t.dst, 2, nd);
  g.kernel_spatial = present(w) ? dims_product(w, grouped ? 3 : 2, w->ndims) : 0;
  if (g.groups <= 0) g.groups = 1;
  return g;
}

inline CallCost gemm_cost(int64_t m, int64_t n, int64_t k, int64_t batch, DType t, uint64_t bytes) {
  CallCost c;
  c.flops = 2 * uint64_t(m) * uint64_t(n) * uint64_t(k) * uint64_t(batch);
  c.bytes = bytes;
  c.shape = GemmShape{m, n, k, batch, 'N', 'N', t};
  return c;
}

// A forward convolution with in-channels ci, out-channels co, computing `out` points from `in`
// points; the backward passes are the same GEMMs with their operands exchanged.
inline CallCost conv_like(Dir d, int64_t n, int64_t ci, int64_t co, int64_t g, int64_t out,
                          int64_t ksp, DType t, uint64_t bytes) {
  int64_t m = n * out, cig = ci / g, cog = co / g;
  switch (d) {
    case Dir::kBwdData:
      return gemm_cost(m, cig * ksp, cog, g, t, bytes);
    case Dir::kBwdWeights:
      return gemm_cost(cog, cig * ksp, m, g, t, bytes);
    default:
      return gemm_cost(m, cog, cig * ksp, g, t, bytes);
  }
}

inline DType data_type(const Tensors& t) {
  return dtype_of(present(t.src) ? t.src->data_type : dnnl_data_type_undef);
}

inline CallCost convolution(Dir d, const Tensors& t) {
  ConvGeometry g = conv_geometry(t);
  return conv_like(d, g.n, g.ic, g.oc, g.groups, g.out_spatial, g.kernel_spatial, data_type(t),
                   t.bytes);
}

// Deconvolution forward is convolution backward-data with dst and src exchanged (and so on).
inline CallCost deconvolution(Dir d, const Tensors& t) {
  ConvGeometry g = conv_geometry(t);
  Dir conv_d = d == Dir::kFwd ? Dir::kBwdData : d == Dir::kBwdData ? Dir::kFwd : d;
  return conv_like(conv_d, g.n, g.oc, g.ic, g.groups, g.in_spatial, g.kernel_spatial, data_type(t),
                   t.bytes);
}

// dst (N x OC) = src (N x IC x spatial, flattened) times weights^T.
inline CallCost inner_product(Dir d, const Tensors& t) {
  int64_t n = dim(t.src, 0), oc = dim(t.dst, 1);
  int64_t ic = n > 0 ? elements(t.src) / n : 0;
  DType ty = data_type(t);
  switch (d) {
    case Dir::kBwdData:
      return gemm_cost(n, ic, oc, 1, ty, t.bytes);
    case Dir::kBwdWeights:
      return gemm_cost(oc, ic, n, 1, ty, t.bytes);
    default:
      return gemm_cost(n, oc, ic, 1, ty, t.bytes);
  }
}

// dst (batch x M x N) = src (batch x M x K) weights (batch x K x N), batch dims broadcast.
inline CallCost matmul(const Tensors& t) {
  if (!present(t.src) || !present(t.dst)) return CallCost{0, t.bytes, {}, {}};
  int s = t.src->ndims, o = t.dst->ndims;
  int64_t m = dim(t.dst, o - 2), n = dim(t.dst, o - 1), k = dim(t.src, s - 1);
  int64_t batch = dims_product(t.dst, 0, o - 2);
  return gemm_cost(m, n, k, batch, data_type(t), t.bytes);
}

// Everything else: bytes only.
inline CallCost data_movement(const Tensors& t) { return CallCost{0, t.bytes, {}, {}}; }

inline CallCost cost(dnnl_primitive_kind_t kind, Dir d, const Tensors& t) {
  switch (kind) {
    case dnnl_convolution:
      return convolution(d, t);
    case dnnl_deconvolution:
      return deconvolution(d, t);
    case dnnl_inner_product:
      return inner_product(d, t);
    case dnnl_matmul:
      return matmul(t);
    default:
      return data_movement(t);
  }
}

}  // namespace sonde::onednn
