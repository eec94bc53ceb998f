// The CNN of cnn_cudnn on the GPU: every layer one cuDNN or cuBLAS call, so a profile shows
// the library calls (and their kernels) under the training phases.
//   x (N,1,28,28) -conv 5x5, 8, pad 2-> (N,8,28,28) -ReLU- -max-pool 2-> (N,8,14,14)
//   -conv 5x5, 16, pad 2-> (N,16,14,14) -ReLU- -max-pool 2-> (N,16,7,7) = 784 features
//   -fully connected 784x10 (cuBLAS)-> logits -softmax (cuDNN)-> probabilities
// The loss and its gradient are computed on the host from the downloaded probabilities: the
// per-step device-to-host copy is also the step's synchronisation, as loss.item() is in PyTorch.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstdint>
#include <vector>

#include "device_buffer.hpp"
#include "rng.hpp"

namespace cnn {

struct BatchStats {
  double loss_sum = 0;  // over the counted rows
  long correct = 0;
};

// A learnable tensor: value, gradient, momentum.
struct Param {
  DeviceBuffer value, grad, velocity;
};

class Cnn {
 public:
  Cnn(int batch, mlp::Rng& rng);
  ~Cnn();
  Cnn(const Cnn&) = delete;
  Cnn& operator=(const Cnn&) = delete;

  // One SGD step on a full batch of host images and labels; returns the batch's loss and hits.
  BatchStats train_step(const float* x, const std::int32_t* labels, float lr, float momentum);
  // Forward only on a full batch; only the first `count` rows are scored (the rest is padding).
  BatchStats score(const float* x, const std::int32_t* labels, int count);

  int batch() const { return batch_; }

 private:
  struct Conv {
    cudnnFilterDescriptor_t w_desc = nullptr;
    cudnnTensorDescriptor_t bias_desc = nullptr;
    cudnnConvolutionDescriptor_t desc = nullptr;
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t bwd_data{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
    Param w, b;
  };

  void upload_batch(const float* x);
  void forward();
  BatchStats loss(const std::int32_t* labels, int count, bool gradient);
  void backward();
  void update(float lr, float momentum);

  void make_conv(Conv& c, int in_ch, int out_ch, cudnnTensorDescriptor_t in,
                 cudnnTensorDescriptor_t out, mlp::Rng& rng);
  cudnnTensorDescriptor_t tensor(int n, int c, int h, int w);

  int batch_;
  cudnnHandle_t dnn_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudnnActivationDescriptor_t relu_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  std::vector<cudnnTensorDescriptor_t> tensors_;  // owned, destroyed with the model

  cudnnTensorDescriptor_t x_desc_, c1_desc_, p1_desc_, c2_desc_, p2_desc_, z_desc_;
  Conv conv1_, conv2_;
  Param fc_w_, fc_b_;  // fc_w_: 784x10 column-major
  DeviceBuffer x_, c1_, a1_, p1_, c2_, a2_, p2_, z_, prob_;
  DeviceBuffer dz_, dp2_, da2_, dc2_, dp1_, da1_, dc1_;
  DeviceBuffer ones_, workspace_;
  std::vector<float> host_prob_, host_dz_;
};

}  // namespace cnn
