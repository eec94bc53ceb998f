#include "cnn.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sonde/sonde.h"

namespace cnn {
namespace {

constexpr int kSide = 28, kPixels = kSide * kSide, kClasses = 10;
constexpr int kC1 = 8, kC2 = 16, kKernel = 5, kPad = 2;
constexpr int kS1 = kSide / 2, kS2 = kSide / 4;  // after each 2x2 pooling
constexpr int kFeatures = kC2 * kS2 * kS2;       // 784
constexpr float kOne = 1.0f, kZero = 0.0f;

std::size_t elems(int n, int c, int s) { return std::size_t(n) * c * s * s; }

Param make_param(std::size_t count, float scale, mlp::Rng& rng) {
  Param p{DeviceBuffer(count), DeviceBuffer(count), DeviceBuffer(count)};
  std::vector<float> host(count);
  for (float& v : host) v = scale * static_cast<float>(rng.normal());
  p.value.upload(host);
  p.velocity.zero();
  return p;
}

}  // namespace

cudnnTensorDescriptor_t Cnn::tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  GPU_CHECK(cudnnCreateTensorDescriptor(&d));
  tensors_.push_back(d);
  GPU_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  return d;
}

void Cnn::make_conv(Conv& c, int in_ch, int out_ch, cudnnTensorDescriptor_t in,
                    cudnnTensorDescriptor_t out, mlp::Rng& rng) {
  GPU_CHECK(cudnnCreateFilterDescriptor(&c.w_desc));
  GPU_CHECK(cudnnSetFilter4dDescriptor(c.w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, out_ch, in_ch,
                                       kKernel, kKernel));
  c.bias_desc = tensor(1, out_ch, 1, 1);
  GPU_CHECK(cudnnCreateConvolutionDescriptor(&c.desc));
  GPU_CHECK(cudnnSetConvolution2dDescriptor(c.desc, kPad, kPad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
  // cuDNN's heuristics rank the algorithms; the first that reports success is taken.
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[8];
  GPU_CHECK(
      cudnnGetConvolutionForwardAlgorithm_v7(dnn_, in, c.w_desc, c.desc, out, 8, &found, fwd));
  cudnnConvolutionBwdDataAlgoPerf_t bd[8];
  int found_bd = 0;
  GPU_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn_, c.w_desc, out, c.desc, in, 8,
                                                        &found_bd, bd));
  cudnnConvolutionBwdFilterAlgoPerf_t bf[8];
  int found_bf = 0;
  GPU_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn_, in, out, c.desc, c.w_desc, 8,
                                                          &found_bf, bf));
  auto first_ok = [](const auto* perf, int n) {
    for (int i = 0; i < n; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS) return perf[i].algo;
    throw GpuError("cuDNN offers no usable convolution algorithm");
  };
  c.fwd = first_ok(fwd, found);
  c.bwd_data = first_ok(bd, found_bd);
  c.bwd_filter = first_ok(bf, found_bf);
  std::size_t ws = 0, need = 0;
  GPU_CHECK(cudnnGetConvolutionForwardWorkspaceSize(dnn_, in, c.w_desc, c.desc, out, c.fwd, &need));
  ws = std::max(ws, need);
  GPU_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn_, c.w_desc, out, c.desc, in,
                                                         c.bwd_data, &need));
  ws = std::max(ws, need);
  GPU_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn_, in, out, c.desc, c.w_desc,
                                                           c.bwd_filter, &need));
  ws = std::max(ws, need);
  if (ws > workspace_.size() * sizeof(float)) workspace_ = DeviceBuffer((ws + 3) / 4);
  // He initialisation: the variance of a ReLU layer's output stays that of its input.
  const int fan_in = in_ch * kKernel * kKernel;
  c.w = make_param(std::size_t(out_ch) * fan_in, std::sqrt(2.0f / fan_in), rng);
  c.b = make_param(std::size_t(out_ch), 0.0f, rng);
}

Cnn::Cnn(int batch, mlp::Rng& rng) : batch_(batch) {
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0)
    throw GpuError(std::string("no usable GPU (cudaGetDeviceCount: ") +
                   (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
  GPU_CHECK(cudnnCreate(&dnn_));
  GPU_CHECK(cublasCreate(&blas_));
  GPU_CHECK(cudnnCreateActivationDescriptor(&relu_));
  GPU_CHECK(
      cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  GPU_CHECK(cudnnCreatePoolingDescriptor(&pool_));
  GPU_CHECK(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0,
                                        0, 2, 2));
  const int n = batch;
  x_desc_ = tensor(n, 1, kSide, kSide);
  c1_desc_ = tensor(n, kC1, kSide, kSide);
  p1_desc_ = tensor(n, kC1, kS1, kS1);
  c2_desc_ = tensor(n, kC2, kS1, kS1);
  p2_desc_ = tensor(n, kC2, kS2, kS2);
  z_desc_ = tensor(n, kClasses, 1, 1);
  make_conv(conv1_, 1, kC1, x_desc_, c1_desc_, rng);
  make_conv(conv2_, kC1, kC2, p1_desc_, c2_desc_, rng);
  fc_w_ = make_param(std::size_t(kFeatures) * kClasses, std::sqrt(1.0f / kFeatures), rng);
  fc_b_ = make_param(kClasses, 0.0f, rng);

  x_ = DeviceBuffer(elems(n, 1, kSide));
  c1_ = DeviceBuffer(elems(n, kC1, kSide));
  a1_ = DeviceBuffer(elems(n, kC1, kSide));
  p1_ = DeviceBuffer(elems(n, kC1, kS1));
  c2_ = DeviceBuffer(elems(n, kC2, kS1));
  a2_ = DeviceBuffer(elems(n, kC2, kS1));
  p2_ = DeviceBuffer(elems(n, kC2, kS2));
  z_ = DeviceBuffer(std::size_t(n) * kClasses);
  prob_ = DeviceBuffer(std::size_t(n) * kClasses);
  dz_ = DeviceBuffer(std::size_t(n) * kClasses);
  dp2_ = DeviceBuffer(elems(n, kC2, kS2));
  da2_ = DeviceBuffer(elems(n, kC2, kS1));
  dc2_ = DeviceBuffer(elems(n, kC2, kS1));
  dp1_ = DeviceBuffer(elems(n, kC1, kS1));
  da1_ = DeviceBuffer(elems(n, kC1, kSide));
  dc1_ = DeviceBuffer(elems(n, kC1, kSide));
  ones_ = DeviceBuffer(std::size_t(n));
  ones_.upload(std::vector<float>(std::size_t(n), 1.0f));
  host_prob_.resize(std::size_t(n) * kClasses);
  host_dz_.resize(std::size_t(n) * kClasses);
}

Cnn::~Cnn() {
  for (Conv* c : {&conv1_, &conv2_}) {
    if (c->w_desc) cudnnDestroyFilterDescriptor(c->w_desc);
    if (c->desc) cudnnDestroyConvolutionDescriptor(c->desc);
  }
  for (cudnnTensorDescriptor_t d : tensors_) cudnnDestroyTensorDescriptor(d);
  if (pool_) cudnnDestroyPoolingDescriptor(pool_);
  if (relu_) cudnnDestroyActivationDescriptor(relu_);
  if (blas_) cublasDestroy(blas_);
  if (dnn_) cudnnDestroy(dnn_);
}

void Cnn::upload_batch(const float* x) { x_.upload(x, x_.size()); }

void Cnn::forward() {
  void* ws = workspace_.get();
  std::size_t ws_bytes = workspace_.size() * sizeof(float);
  auto conv = [&](Conv& c, cudnnTensorDescriptor_t in_d, const DeviceBuffer& in,
                  cudnnTensorDescriptor_t out_d, DeviceBuffer& out) {
    GPU_CHECK(cudnnConvolutionForward(dnn_, &kOne, in_d, in.get(), c.w_desc, c.w.value.get(),
                                      c.desc, c.fwd, ws, ws_bytes, &kZero, out_d, out.get()));
    GPU_CHECK(cudnnAddTensor(dnn_, &kOne, c.bias_desc, c.b.value.get(), &kOne, out_d, out.get()));
  };
  conv(conv1_, x_desc_, x_, c1_desc_, c1_);
  GPU_CHECK(
      cudnnActivationForward(dnn_, relu_, &kOne, c1_desc_, c1_.get(), &kZero, c1_desc_, a1_.get()));
  GPU_CHECK(
      cudnnPoolingForward(dnn_, pool_, &kOne, c1_desc_, a1_.get(), &kZero, p1_desc_, p1_.get()));
  conv(conv2_, p1_desc_, p1_, c2_desc_, c2_);
  GPU_CHECK(
      cudnnActivationForward(dnn_, relu_, &kOne, c2_desc_, c2_.get(), &kZero, c2_desc_, a2_.get()));
  GPU_CHECK(
      cudnnPoolingForward(dnn_, pool_, &kOne, c2_desc_, a2_.get(), &kZero, p2_desc_, p2_.get()));
  // Column-major: z (10 x N) = W^T (10 x 784) p2 (784 x N), then z += b 1^T.
  GPU_CHECK(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, kClasses, batch_, kFeatures, &kOne,
                        fc_w_.value.get(), kFeatures, p2_.get(), kFeatures, &kZero, z_.get(),
                        kClasses));
  GPU_CHECK(cublasSger(blas_, kClasses, batch_, &kOne, fc_b_.value.get(), 1, ones_.get(), 1,
                       z_.get(), kClasses));
  GPU_CHECK(cudnnSoftmaxForward(dnn_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne,
                                z_desc_, z_.get(), &kZero, z_desc_, prob_.get()));
}

BatchStats Cnn::loss(const std::int32_t* labels, int count, bool gradient) {
  prob_.download(host_prob_.data(), host_prob_.size());
  BatchStats s;
  std::fill(host_dz_.begin(), host_dz_.end(), 0.0f);
  for (int r = 0; r < count; ++r) {
    const float* p = host_prob_.data() + std::size_t(r) * kClasses;
    const int label = labels[r];
    s.loss_sum -= std::log(std::max(p[label], 1e-30f));
    s.correct += (std::max_element(p, p + kClasses) - p) == label;
    if (!gradient) continue;
    // Softmax cross-entropy, mean over the batch: dL/dz = (p - onehot) / N.
    float* dz = host_dz_.data() + std::size_t(r) * kClasses;
    for (int k = 0; k < kClasses; ++k) dz[k] = (p[k] - (k == label ? 1.0f : 0.0f)) / count;
  }
  if (gradient) dz_.upload(host_dz_);
  return s;
}

void Cnn::backward() {
  void* ws = workspace_.get();
  std::size_t ws_bytes = workspace_.size() * sizeof(float);
  // Fully connected: dW (784 x 10) = p2 dz^T, db = dz 1, dp2 (784 x N) = W dz.
  GPU_CHECK(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, kFeatures, kClasses, batch_, &kOne,
                        p2_.get(), kFeatures, dz_.get(), kClasses, &kZero, fc_w_.grad.get(),
                        kFeatures));
  GPU_CHECK(cublasSgemv(blas_, CUBLAS_OP_N, kClasses, batch_, &kOne, dz_.get(), kClasses,
                        ones_.get(), 1, &kZero, fc_b_.grad.get(), 1));
  GPU_CHECK(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, kFeatures, batch_, kClasses, &kOne,
                        fc_w_.value.get(), kFeatures, dz_.get(), kClasses, &kZero, dp2_.get(),
                        kFeatures));
  // Block 2: pool, ReLU, convolution (filter, bias and data gradients).
  GPU_CHECK(cudnnPoolingBackward(dnn_, pool_, &kOne, p2_desc_, p2_.get(), p2_desc_, dp2_.get(),
                                 c2_desc_, a2_.get(), &kZero, c2_desc_, da2_.get()));
  GPU_CHECK(cudnnActivationBackward(dnn_, relu_, &kOne, c2_desc_, a2_.get(), c2_desc_, da2_.get(),
                                    c2_desc_, c2_.get(), &kZero, c2_desc_, dc2_.get()));
  GPU_CHECK(cudnnConvolutionBackwardBias(dnn_, &kOne, c2_desc_, dc2_.get(), &kZero,
                                         conv2_.bias_desc, conv2_.b.grad.get()));
  GPU_CHECK(cudnnConvolutionBackwardFilter(dnn_, &kOne, p1_desc_, p1_.get(), c2_desc_, dc2_.get(),
                                           conv2_.desc, conv2_.bwd_filter, ws, ws_bytes, &kZero,
                                           conv2_.w_desc, conv2_.w.grad.get()));
  GPU_CHECK(cudnnConvolutionBackwardData(dnn_, &kOne, conv2_.w_desc, conv2_.w.value.get(), c2_desc_,
                                         dc2_.get(), conv2_.desc, conv2_.bwd_data, ws, ws_bytes,
                                         &kZero, p1_desc_, dp1_.get()));
  // Block 1: no gradient for the input images.
  GPU_CHECK(cudnnPoolingBackward(dnn_, pool_, &kOne, p1_desc_, p1_.get(), p1_desc_, dp1_.get(),
                                 c1_desc_, a1_.get(), &kZero, c1_desc_, da1_.get()));
  GPU_CHECK(cudnnActivationBackward(dnn_, relu_, &kOne, c1_desc_, a1_.get(), c1_desc_, da1_.get(),
                                    c1_desc_, c1_.get(), &kZero, c1_desc_, dc1_.get()));
  GPU_CHECK(cudnnConvolutionBackwardBias(dnn_, &kOne, c1_desc_, dc1_.get(), &kZero,
                                         conv1_.bias_desc, conv1_.b.grad.get()));
  GPU_CHECK(cudnnConvolutionBackwardFilter(dnn_, &kOne, x_desc_, x_.get(), c1_desc_, dc1_.get(),
                                           conv1_.desc, conv1_.bwd_filter, ws, ws_bytes, &kZero,
                                           conv1_.w_desc, conv1_.w.grad.get()));
}

void Cnn::update(float lr, float momentum) {
  // Momentum SGD with cuBLAS only: v = momentum v + g; w -= lr v.
  const float neg_lr = -lr;
  for (Param* p : {&conv1_.w, &conv1_.b, &conv2_.w, &conv2_.b, &fc_w_, &fc_b_}) {
    const int n = static_cast<int>(p->value.size());
    GPU_CHECK(cublasSscal(blas_, n, &momentum, p->velocity.get(), 1));
    GPU_CHECK(cublasSaxpy(blas_, n, &kOne, p->grad.get(), 1, p->velocity.get(), 1));
    GPU_CHECK(cublasSaxpy(blas_, n, &neg_lr, p->velocity.get(), 1, p->value.get(), 1));
  }
}

BatchStats Cnn::train_step(const float* x, const std::int32_t* labels, float lr, float momentum) {
  sonde_region_begin("h2d");
  upload_batch(x);
  sonde_region_end("h2d");
  sonde_region_begin("forward");
  forward();
  sonde_region_end("forward");
  sonde_region_begin("loss");
  BatchStats s = loss(labels, batch_, true);
  sonde_region_end("loss");
  sonde_region_begin("backward");
  backward();
  sonde_region_end("backward");
  sonde_region_begin("update");
  update(lr, momentum);
  sonde_region_end("update");
  return s;
}

BatchStats Cnn::score(const float* x, const std::int32_t* labels, int count) {
  upload_batch(x);
  forward();
  return loss(labels, count, false);
}

}  // namespace cnn
