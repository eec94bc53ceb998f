/* Stand-in for libcudnn.so.9: tensor, filter and convolution descriptors that keep what is set on
 * them (the queries sonde's cost models make read it back), and the entry points sonde wraps. */
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

struct cudnnContext {
  int unused;
};
struct cudnnTensorStruct {
  cudnnDataType_t type;
  int nd, dims[CUDNN_DIM_MAX], strides[CUDNN_DIM_MAX];
};
struct cudnnFilterStruct {
  cudnnDataType_t type;
  cudnnTensorFormat_t format;
  int nd, dims[CUDNN_DIM_MAX];
};
struct cudnnConvolutionStruct {
  int nd, pad[CUDNN_DIM_MAX], stride[CUDNN_DIM_MAX], dilation[CUDNN_DIM_MAX], groups;
  cudnnConvolutionMode_t mode;
  cudnnDataType_t compute;
};

/* Built three times, as the sub-libraries cuDNN 9 ships (libcudnn_graph, libcudnn_ops,
 * libcudnn_cnn), each with its part of the API; libcudnn.so.9 is cudnn_dispatch.c. */
#define OK CUDNN_STATUS_SUCCESS
#define BAD CUDNN_STATUS_BAD_PARAM

#if STUB_PART_GRAPH
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  *h = calloc(1, sizeof(struct cudnnContext));
  return OK;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  free(h);
  return OK;
}

/* ---- tensors ---- */
#endif
#if STUB_PART_OPS
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  *d = calloc(1, sizeof(struct cudnnTensorStruct));
  return OK;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  free(d);
  return OK;
}
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type, int nd,
                                         const int dims[], const int strides[]) {
  if (d == NULL || nd < 1 || nd > CUDNN_DIM_MAX) return BAD;
  d->type = type;
  d->nd = nd;
  memcpy(d->dims, dims, sizeof(int) * nd);
  memcpy(d->strides, strides, sizeof(int) * nd);
  return OK;
}
/* NCHW strides; an NHWC layout changes only the strides, never the dimension order. */
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w) {
  int dims[4] = {n, c, h, w};
  int nchw[4] = {c * h * w, h * w, w, 1}, nhwc[4] = {h * w * c, 1, w * c, c};
  return cudnnSetTensorNdDescriptor(d, type, 4, dims, format == CUDNN_TENSOR_NHWC ? nhwc : nchw);
}
cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t d, int requested,
                                         cudnnDataType_t* type, int* nd, int dims[],
                                         int strides[]) {
  if (d == NULL || d->nd == 0) return BAD;
  *type = d->type;
  *nd = d->nd;
  for (int i = 0; i < d->nd && i < requested; ++i) {
    dims[i] = d->dims[i];
    strides[i] = d->strides[i];
  }
  return OK;
}
cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t* type,
                                         int* n, int* c, int* h, int* w, int* ns, int* cs, int* hs,
                                         int* ws) {
  if (d == NULL || d->nd != 4) return BAD;
  *type = d->type;
  *n = d->dims[0], *c = d->dims[1], *h = d->dims[2], *w = d->dims[3];
  *ns = d->strides[0], *cs = d->strides[1], *hs = d->strides[2], *ws = d->strides[3];
  return OK;
}

/* ---- filters ---- */
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  *d = calloc(1, sizeof(struct cudnnFilterStruct));
  return OK;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  free(d);
  return OK;
}
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int nd, const int dims[]) {
  if (d == NULL || nd < 1 || nd > CUDNN_DIM_MAX) return BAD;
  d->type = type;
  d->format = format;
  d->nd = nd;
  memcpy(d->dims, dims, sizeof(int) * nd);
  return OK;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  int dims[4] = {k, c, h, w};
  return cudnnSetFilterNdDescriptor(d, type, format, 4, dims);
}
cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t d, int requested,
                                         cudnnDataType_t* type, cudnnTensorFormat_t* format,
                                         int* nd, int dims[]) {
  if (d == NULL || d->nd == 0) return BAD;
  *type = d->type;
  *format = d->format;
  *nd = d->nd;
  for (int i = 0; i < d->nd && i < requested; ++i) dims[i] = d->dims[i];
  return OK;
}
cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t d, cudnnDataType_t* type,
                                         cudnnTensorFormat_t* format, int* k, int* c, int* h,
                                         int* w) {
  if (d == NULL || d->nd != 4) return BAD;
  *type = d->type;
  *format = d->format;
  *k = d->dims[0], *c = d->dims[1], *h = d->dims[2], *w = d->dims[3];
  return OK;
}

/* ---- convolutions ---- */
#endif
#if STUB_PART_CNN
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  *d = calloc(1, sizeof(struct cudnnConvolutionStruct));
  (*d)->groups = 1;
  return OK;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  free(d);
  return OK;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w,
                                              int u, int v, int dilation_h, int dilation_w,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  if (d == NULL) return BAD;
  d->nd = 2;
  d->pad[0] = pad_h, d->pad[1] = pad_w;
  d->stride[0] = u, d->stride[1] = v;
  d->dilation[0] = dilation_h, d->dilation[1] = dilation_w;
  d->mode = mode;
  d->compute = compute;
  return OK;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
  if (d == NULL || groups < 1) return BAD;
  d->groups = groups;
  return OK;
}
cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int* groups) {
  if (d == NULL) return BAD;
  *groups = d->groups;
  return OK;
}
/* The output size cuDNN documents: 1 + (in + 2 pad - ((filter - 1) dilation + 1)) / stride. */
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int* n, int* c,
                                                    int* h, int* wd) {
  if (conv == NULL || x == NULL || w == NULL || conv->nd != 2 || x->nd != 4 || w->nd != 4) {
    return BAD;
  }
  int out[2];
  for (int i = 0; i < 2; ++i) {
    int span = (w->dims[2 + i] - 1) * conv->dilation[i] + 1;
    out[i] = 1 + (x->dims[2 + i] + 2 * conv->pad[i] - span) / conv->stride[i];
  }
  *n = x->dims[0], *c = w->dims[0], *h = out[0], *wd = out[1];
  return OK;
}

/* Pooling and activation descriptors: opaque here, nothing reads them. */
#endif
#if STUB_PART_OPS
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t* d) {
  *d = calloc(1, 64);
  return OK;
}
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
  free(d);
  return OK;
}
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* d) {
  *d = calloc(1, 64);
  return OK;
}
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) {
  free(d);
  return OK;
}
#endif

/* ---- the entry points sonde wraps: they succeed and do nothing ---- */
#define H cudnnHandle_t handle
#define TD const cudnnTensorDescriptor_t
#define FD const cudnnFilterDescriptor_t
#define CD const cudnnConvolutionDescriptor_t
#if STUB_PART_CNN
cudnnStatus_t cudnnConvolutionForward(H, const void* a, TD xd, const void* x, FD wd, const void* w,
                                      CD cd, cudnnConvolutionFwdAlgo_t algo, void* ws, size_t wsn,
                                      const void* b, TD yd, void* y) {
  return OK;
}
cudnnStatus_t cudnnConvolutionBackwardData(H, const void* a, FD wd, const void* w, TD dyd,
                                           const void* dy, CD cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t wsn,
                                           const void* b, TD dxd, void* dx) {
  return OK;
}
cudnnStatus_t cudnnConvolutionBackwardFilter(H, const void* a, TD xd, const void* x, TD dyd,
                                             const void* dy, CD cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* ws,
                                             size_t wsn, const void* b, FD dwd, void* dw) {
  return OK;
}
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    H, const void* a1, TD xd, const void* x, FD wd, const void* w, CD cd,
    cudnnConvolutionFwdAlgo_t algo, void* ws, size_t wsn, const void* a2, TD zd, const void* z,
    TD bd, const void* bias, const cudnnActivationDescriptor_t ad, TD yd, void* y) {
  return OK;
}
#endif
#if STUB_PART_OPS
cudnnStatus_t cudnnPoolingForward(H, const cudnnPoolingDescriptor_t p, const void* a, TD xd,
                                  const void* x, const void* b, TD yd, void* y) {
  return OK;
}
cudnnStatus_t cudnnPoolingBackward(H, const cudnnPoolingDescriptor_t p, const void* a, TD yd,
                                   const void* y, TD dyd, const void* dy, TD xd, const void* x,
                                   const void* b, TD dxd, void* dx) {
  return OK;
}
cudnnStatus_t cudnnActivationForward(H, cudnnActivationDescriptor_t ad, const void* a, TD xd,
                                     const void* x, const void* b, TD yd, void* y) {
  return OK;
}
cudnnStatus_t cudnnActivationBackward(H, cudnnActivationDescriptor_t ad, const void* a, TD yd,
                                      const void* y, TD dyd, const void* dy, TD xd, const void* x,
                                      const void* b, TD dxd, void* dx) {
  return OK;
}
cudnnStatus_t cudnnBatchNormalizationForwardTraining(H, cudnnBatchNormMode_t m, const void* a,
                                                     const void* b, TD xd, const void* x, TD yd,
                                                     void* y, TD pd, const void* scale,
                                                     const void* bias, double factor,
                                                     void* run_mean, void* run_var, double eps,
                                                     void* save_mean, void* save_inv_var) {
  return OK;
}
cudnnStatus_t cudnnBatchNormalizationForwardInference(H, cudnnBatchNormMode_t m, const void* a,
                                                      const void* b, TD xd, const void* x, TD yd,
                                                      void* y, TD pd, const void* scale,
                                                      const void* bias, const void* mean,
                                                      const void* var, double eps) {
  return OK;
}
cudnnStatus_t cudnnBatchNormalizationBackward(H, cudnnBatchNormMode_t m, const void* ad,
                                              const void* bd, const void* ap, const void* bp, TD xd,
                                              const void* x, TD dyd, const void* dy, TD dxd,
                                              void* dx, TD pd, const void* scale, void* dscale,
                                              void* dbias, double eps, const void* mean,
                                              const void* inv_var) {
  return OK;
}
cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    H, cudnnBatchNormMode_t m, cudnnBatchNormOps_t ops, const void* a, const void* b, TD xd,
    const void* x, TD zd, const void* z, TD yd, void* y, TD pd, const void* scale, const void* bias,
    double factor, void* run_mean, void* run_var, double eps, void* save_mean, void* save_inv_var,
    cudnnActivationDescriptor_t act, void* ws, size_t ws_size, void* rs, size_t rs_size) {
  return OK;
}
cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    H, cudnnBatchNormMode_t m, cudnnBatchNormOps_t ops, const void* ad, const void* bd,
    const void* ap, const void* bp, TD xd, const void* x, TD yd, const void* y, TD dyd,
    const void* dy, TD dzd, void* dz, TD dxd, void* dx, TD pd, const void* scale, const void* bias,
    void* dscale, void* dbias, double eps, const void* mean, const void* inv_var,
    cudnnActivationDescriptor_t act, void* ws, size_t ws_size, void* rs, size_t rs_size) {
  return OK;
}
cudnnStatus_t cudnnSoftmaxForward(H, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                  const void* a, TD xd, const void* x, const void* b, TD yd,
                                  void* y) {
  return OK;
}
cudnnStatus_t cudnnSoftmaxBackward(H, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                   const void* a, TD yd, const void* y, TD dyd, const void* dy,
                                   const void* b, TD dxd, void* dx) {
  return OK;
}
#endif
#if STUB_PART_GRAPH
cudnnStatus_t cudnnBackendExecute(H, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
  return OK;
}

/* The graph API's descriptors keep the attributes set on them. Getting a descriptor attribute
 * copies it into descriptors the caller created, which must be of its type (an assumption the
 * docs list); asking for 0 elements gives the count. */
#define MAX_ATTRS 16
#define ATTR_BYTES 128
struct stub_attr {
  cudnnBackendAttributeName_t name;
  int64_t count;
  unsigned char data[ATTR_BYTES];
};
struct stub_backend {
  cudnnBackendDescriptorType_t type;
  int nattrs;
  struct stub_attr attrs[MAX_ATTRS];
};
static size_t element_bytes(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
      return sizeof(void*);
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE:
      return 8;
    default:
      return 4; /* enums, int32, float */
  }
}
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t* d) {
  struct stub_backend* b = calloc(1, sizeof(struct stub_backend));
  if (b == NULL) return CUDNN_STATUS_ALLOC_FAILED;
  b->type = type;
  *d = b;
  return OK;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d) {
  free(d);
  return OK;
}
cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t d) { return d ? OK : BAD; }
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void* elements) {
  struct stub_backend* b = d;
  size_t bytes = (size_t)count * element_bytes(type);
  if (b == NULL || count < 0 || bytes > ATTR_BYTES || b->nattrs == MAX_ATTRS) return BAD;
  struct stub_attr* a = &b->attrs[b->nattrs++];
  a->name = name;
  a->count = count;
  memcpy(a->data, elements, bytes);
  return OK;
}
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const d,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t* count, void* elements) {
  const struct stub_backend* b = d;
  if (b == NULL || count == NULL) return BAD;
  for (int i = b->nattrs - 1; i >= 0; --i) {
    const struct stub_attr* a = &b->attrs[i];
    if (a->name != name) continue;
    *count = a->count;
    if (requested <= 0 || elements == NULL) return OK;
    int64_t n = requested < a->count ? requested : a->count;
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR) {
      memcpy(elements, a->data, (size_t)n * element_bytes(type));
      return OK;
    }
    for (int64_t k = 0; k < n; ++k) {
      struct stub_backend* dst = ((struct stub_backend**)elements)[k];
      const struct stub_backend* src = ((const struct stub_backend* const*)a->data)[k];
      if (dst == NULL || src == NULL || dst->type != src->type) return BAD;
      *dst = *src;
    }
    return OK;
  }
  return CUDNN_STATUS_NOT_INITIALIZED;
}

/* What examples/cnn_cudnn (cnn_train) calls besides the wrapped entry points: descriptor setters,
 * algorithm heuristics offering algorithm 0 with no workspace, bias and error strings. */
const char* cudnnGetErrorString(cudnnStatus_t s) {
  return s == OK ? "CUDNN_STATUS_SUCCESS" : "stub";
}
#endif
#if STUB_PART_OPS
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t m,
                                           cudnnNanPropagation_t nan, double coef) {
  return OK;
}
cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t m,
                                          cudnnNanPropagation_t nan, int wh, int ww, int ph, int pw,
                                          int sh, int sw) {
  return OK;
}
cudnnStatus_t cudnnAddTensor(H, const void* a, TD bd, const void* b, const void* beta, TD yd,
                             void* y) {
  return OK;
}
#endif
#if STUB_PART_CNN
cudnnStatus_t cudnnConvolutionBackwardBias(H, const void* a, TD dyd, const void* dy,
                                           const void* beta, TD dbd, void* db) {
  return OK;
}
#define ONE_ALGO(perf)                 \
  do {                                 \
    memset(perf, 0, sizeof(*perf));    \
    perf->status = OK;                 \
    *returned = requested > 0 ? 1 : 0; \
  } while (0)
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(H, TD xd, FD wd,
                                                     cudnnConvolutionDescriptor_t c, TD yd,
                                                     int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  ONE_ALGO(perf);
  return OK;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(H, FD wd, TD dyd,
                                                          cudnnConvolutionDescriptor_t c, TD dxd,
                                                          int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  ONE_ALGO(perf);
  return OK;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    H, TD xd, TD dyd, cudnnConvolutionDescriptor_t c, FD dwd, int requested, int* returned,
    cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  ONE_ALGO(perf);
  return OK;
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(H, TD xd, FD wd,
                                                      cudnnConvolutionDescriptor_t c, TD yd,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* n) {
  *n = 0;
  return OK;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(H, FD wd, TD dyd,
                                                           cudnnConvolutionDescriptor_t c, TD dxd,
                                                           cudnnConvolutionBwdDataAlgo_t algo,
                                                           size_t* n) {
  *n = 0;
  return OK;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(H, TD xd, TD dyd,
                                                             cudnnConvolutionDescriptor_t c, FD dwd,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t* n) {
  *n = 0;
  return OK;
}
#endif
