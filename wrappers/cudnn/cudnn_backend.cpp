// Walks an execution plan down to its operations: plan -> engine config
// (CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG) -> engine (CUDNN_ATTR_ENGINECFG_ENGINE) -> operation
// graph (CUDNN_ATTR_ENGINE_OPERATION_GRAPH) -> operations (CUDNN_ATTR_OPERATIONGRAPH_OPS), and
// costs convolutions (forward, backward data, backward filter) and matmuls from their tensors'
// dimensions and types. The backend API hands a descriptor attribute out by copying it into
// descriptors the caller created, of the attribute's type: the walk creates them and destroys
// them at its end. A graph whose operations are not all of one costed type gets no FLOPs.
#include "cudnn_backend.hpp"

#include <array>
#include <cstddef>

#include "../intercept.hpp"
#include "core/per_thread.hpp"
#include "cudnn_models.hpp"

namespace sonde::cudnn {

namespace {

constexpr int64_t kMaxOps = 16;

struct BackendApi {
  SONDE_REAL_FUNCTION(create, cudnnBackendCreateDescriptor);
  SONDE_REAL_FUNCTION(destroy, cudnnBackendDestroyDescriptor);
  SONDE_REAL_FUNCTION(get, cudnnBackendGetAttribute);
};

const BackendApi& backend_api() {
  static const BackendApi a;
  return a;
}

// The descriptors one walk creates, destroyed with it.
class Walk {
 public:
  explicit Walk(const BackendApi& api) : api_(api) {}
  ~Walk() {
    for (int i = 0; i < made_count_; ++i) api_.destroy(made_[size_t(i)]);
  }
  Walk(const Walk&) = delete;
  Walk& operator=(const Walk&) = delete;

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    if (made_count_ == int(made_.size()) || api_.create(type, &d) != CUDNN_STATUS_SUCCESS) {
      return nullptr;
    }
    made_[size_t(made_count_++)] = d;
    return d;
  }

  // The one descriptor `attr` of `parent` holds, of `type`; nullptr when it cannot be read.
  cudnnBackendDescriptor_t child(cudnnBackendDescriptor_t parent, cudnnBackendAttributeName_t attr,
                                 cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = parent != nullptr ? make(type) : nullptr;
    int64_t n = 0;
    if (d == nullptr ||
        api_.get(parent, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &d) != CUDNN_STATUS_SUCCESS ||
        n != 1) {
      return nullptr;
    }
    return d;
  }

  Dims tensor(cudnnBackendDescriptor_t op, cudnnBackendAttributeName_t attr) {
    Dims r;
    cudnnBackendDescriptor_t t = child(op, attr, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t n = 0, d[kMaxDims] = {};
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    if (t == nullptr ||
        api_.get(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &n, &type) !=
            CUDNN_STATUS_SUCCESS ||
        api_.get(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, kMaxDims, &n, d) !=
            CUDNN_STATUS_SUCCESS ||
        n <= 0 || n > kMaxDims) {
      return r;
    }
    r.type = type;
    r.nd = int(n);
    for (int i = 0; i < r.nd; ++i) r.d[i] = d[i];
    return r;
  }

 private:
  const BackendApi& api_;
  std::array<cudnnBackendDescriptor_t, 3 + 4 * kMaxOps + 4> made_{};
  int made_count_ = 0;
};

CallCost conv_cost(Walk& w, cudnnBackendDescriptor_t op, ConvPass pass) {
  ConvCall c;
  c.pass = pass;
  switch (pass) {
    case ConvPass::kForward:
      c.x = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X);
      c.w = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W);
      c.y = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y);
      break;
    case ConvPass::kBackwardData:
      c.x = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX);
      c.w = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W);
      c.y = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY);
      break;
    case ConvPass::kBackwardFilter:
      c.x = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X);
      c.w = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW);
      c.y = w.tensor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY);
      break;
  }
  // The graph API names no group count: x's channels over w's channels per group.
  if (c.x.nd > 1 && c.w.nd > 1 && c.w.d[1] > 0) c.groups = c.x.d[1] / c.w.d[1];
  return convolution(c);
}

// C (batch.. x m x n) = A (batch.. x m x k) B (batch.. x k x n).
CallCost matmul_cost(Walk& w, cudnnBackendDescriptor_t op) {
  Dims a = w.tensor(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC);
  Dims b = w.tensor(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC);
  Dims c = w.tensor(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC);
  CallCost r;
  r.bytes = bytes_of(a) + bytes_of(b) + bytes_of(c);
  if (a.nd < 2 || c.nd < 2) return r;
  int64_t m = c.d[c.nd - 2], n = c.d[c.nd - 1], k = a.d[a.nd - 1];
  int64_t batch = 1;
  for (int i = 0; i < c.nd - 2; ++i) batch *= c.d[i] > 0 ? c.d[i] : 0;
  r.flops = 2 * uint64_t(batch) * uint64_t(m) * uint64_t(n) * uint64_t(k);
  r.shape = GemmShape{m, n, k, batch, 'N', 'N', dtype_of(a.type)};
  return r;
}

CallCost walk_plan(cudnnBackendDescriptor_t plan) {
  const BackendApi& api = backend_api();
  CallCost total;
  if (plan == nullptr || api.create == nullptr || api.destroy == nullptr || api.get == nullptr) {
    return total;
  }
  Walk w(api);
  cudnnBackendDescriptor_t graph =
      w.child(w.child(w.child(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                              CUDNN_BACKEND_ENGINECFG_DESCRIPTOR),
                      CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR),
              CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  int64_t count = 0;
  if (graph == nullptr ||
      api.get(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
              nullptr) != CUDNN_STATUS_SUCCESS ||
      count <= 0 || count > kMaxOps) {
    return total;
  }
  static constexpr cudnnBackendDescriptorType_t kCosted[] = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR};
  for (cudnnBackendDescriptorType_t type : kCosted) {
    std::array<cudnnBackendDescriptor_t, kMaxOps> ops{};
    bool made = true;
    for (int64_t i = 0; i < count; ++i) made &= (ops[size_t(i)] = w.make(type)) != nullptr;
    int64_t n = 0;
    if (!made || api.get(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                         &n, ops.data()) != CUDNN_STATUS_SUCCESS) {
      continue;  // not all of this type
    }
    for (int64_t i = 0; i < n && i < count; ++i) {
      CallCost c = type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR
                       ? matmul_cost(w, ops[size_t(i)])
                   : type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
                       ? conv_cost(w, ops[size_t(i)], ConvPass::kForward)
                   : type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                       ? conv_cost(w, ops[size_t(i)], ConvPass::kBackwardData)
                       : conv_cost(w, ops[size_t(i)], ConvPass::kBackwardFilter);
      total.flops += c.flops;
      total.bytes += c.bytes;
      if (count == 1) total.shape = c.shape;
    }
    break;
  }
  return total;
}

// Plans are made once and executed many times (PyTorch keeps them in a cache), so each thread
// keeps the cost of the plans it ran: no lock, one allocation per thread. A plan destroyed and
// another made at the same address would be costed as the first (docs/gpu.md).
constexpr size_t kCacheSlots = 64;
struct CacheSlot {
  const void* plan = nullptr;
  CallCost cost;
};
thread_local PerThread<std::array<CacheSlot, kCacheSlots>> t_plans;

}  // namespace

CallCost backend_plan_cost(cudnnBackendDescriptor_t plan) {
  if (plan == nullptr) return {};
  CacheSlot& slot = t_plans.get()[(reinterpret_cast<uintptr_t>(plan) >> 4) % kCacheSlots];
  if (slot.plan != plan) {
    slot.cost = walk_plan(plan);
    slot.plan = plan;
  }
  return slot.cost;
}

}  // namespace sonde::cudnn
