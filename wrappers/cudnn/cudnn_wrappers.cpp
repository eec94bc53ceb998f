// Expands cudnn_routines.def into the interposed cuDNN functions. libsonde is not linked against
// libcudnn: the descriptor queries the cost models need are looked up at their first use, so
// programs without cuDNN load sonde unchanged.
#include <cudnn.h>

#include <array>
#include <cstddef>

#include "../intercept.hpp"
#include "../outermost_call.hpp"
#include "cudnn_backend.hpp"
#include "cudnn_models.hpp"

namespace {

namespace cudnn = sonde::cudnn;

// cuDNN's legacy entry points may run through its graph API: one family, the outer call measured.
struct CudnnFamily {};
using Outermost = sonde::OutermostCall<CudnnFamily>;

#define SONDE_TABLE "cudnn/cudnn_routines.def"  // relative to wrapper_table.inc
#define SONDE_TABLE_CONSTRUCTOR register_cudnn
#define SONDE_CUDNN(NAME, ...) SONDE_TABLE_ROW(NAME, {#NAME, sonde::kinds::kCudnn, "cudnn"})
#include "../wrapper_table.inc"
#undef SONDE_CUDNN
#undef SONDE_TABLE_CONSTRUCTOR
#undef SONDE_TABLE

// The descriptor queries, resolved once (null where the library does not define them).
struct Api {
  SONDE_REAL_FUNCTION(tensor, cudnnGetTensorNdDescriptor);
  SONDE_REAL_FUNCTION(filter, cudnnGetFilterNdDescriptor);
  SONDE_REAL_FUNCTION(groups, cudnnGetConvolutionGroupCount);
};

const Api& api() {
  static const Api a;
  return a;
}

// Dims from a query's int array; nd 0 when the query failed (the cost then has no FLOPs).
cudnn::Dims dims_of(int nd, const int* d, cudnnDataType_t type) {
  cudnn::Dims r;
  r.type = type;
  r.nd = nd > 0 && nd <= cudnn::kMaxDims ? nd : 0;
  for (int i = 0; i < r.nd; ++i) r.d[i] = d[i];
  return r;
}

cudnn::Dims tensor(cudnnTensorDescriptor_t desc) {
  const Api& a = api();
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int nd = 0, d[cudnn::kMaxDims] = {}, strides[cudnn::kMaxDims] = {};
  if (desc == nullptr || a.tensor == nullptr ||
      a.tensor(desc, cudnn::kMaxDims, &type, &nd, d, strides) != CUDNN_STATUS_SUCCESS) {
    return {};
  }
  return dims_of(nd, d, type);
}

cudnn::Dims filter(cudnnFilterDescriptor_t desc) {
  const Api& a = api();
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int nd = 0, d[cudnn::kMaxDims] = {};
  if (desc == nullptr || a.filter == nullptr ||
      a.filter(desc, cudnn::kMaxDims, &type, &format, &nd, d) != CUDNN_STATUS_SUCCESS) {
    return {};
  }
  return dims_of(nd, d, type);
}

uint64_t T(cudnnTensorDescriptor_t desc) { return cudnn::bytes_of(tensor(desc)); }

bool nonzero(const void* scale, cudnnTensorDescriptor_t desc) {
  return cudnn::nonzero_scale(scale, tensor(desc).type);
}

sonde::CallCost conv(cudnn::ConvPass pass, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                     cudnnTensorDescriptor_t y, cudnnConvolutionDescriptor_t desc, bool out_read,
                     uint64_t extra_read) {
  cudnn::ConvCall c;
  c.x = tensor(x), c.w = filter(w), c.y = tensor(y);
  int groups = 1;
  const Api& a = api();
  if (desc != nullptr && a.groups != nullptr && a.groups(desc, &groups) == CUDNN_STATUS_SUCCESS) {
    c.groups = groups;
  }
  c.pass = pass;
  c.extra_read = extra_read;
  c.out_read = out_read;
  return cudnn::convolution(c);
}

// Bytes only: `read` bytes in, the `out` tensor written (and read first when beta != 0).
sonde::CallCost moved(uint64_t read, cudnnTensorDescriptor_t out, const void* beta) {
  cudnn::Dims o = tensor(out);
  return cudnn::data_movement(read, cudnn::bytes_of(o), cudnn::nonzero_scale(beta, o.type));
}

}  // namespace

// Kernels and runtime calls made inside a cuDNN call show beneath it: kChildren.
#define SONDE_CUDNN(NAME, RET, PARAMS, ARGS, MODEL)                                \
  SONDE_INTERCEPT_AS(g_real, ::sonde::Nesting::kChildren, NAME, RET, PARAMS, ARGS, \
                     Outermost(g_ids[size_t(Entry::NAME)]), MODEL)
#include "cudnn_routines.def"
#undef SONDE_CUDNN
