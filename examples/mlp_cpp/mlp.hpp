// The three-layer perceptron of Chainer's MNIST example: Linear-ReLU-Linear-ReLU-Linear with
// softmax cross-entropy. Every matrix product is a CBLAS call, so a profiler that intercepts BLAS
// sees all of the model's floating-point heavy lifting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "rng.hpp"

namespace mlp {

// One fully connected layer, y = x W^T + b, with W stored out x in row-major as Chainer does.
struct Linear {
  int in = 0;
  int out = 0;
  std::vector<float> w, b;    // parameters
  std::vector<float> gw, gb;  // their gradients, overwritten by each backward pass

  Linear(int in_size, int out_size, Rng& rng);
};

// A parameter array and its gradient, as the optimizer sees them.
struct ParamRef {
  float* data;
  const float* grad;
  std::size_t size;
};

struct BatchStats {
  double loss_sum = 0;  // summed over the batch, so partial batches average correctly
  long correct = 0;
};

class Mlp {
 public:
  Mlp(int in_size, int hidden, int classes, int max_batch, Rng& rng);

  // Runs the n rows of x through the network and returns the summed loss and hits. When `grad` is
  // set it also leaves d(mean loss)/d(logits) for backward(): the mean over `mean_over` rows (0: n;
  // a data-parallel rank's share of the global batch averages over the global batch).
  BatchStats forward(const float* x, const std::int32_t* labels, int n, bool grad,
                     int mean_over = 0);

  // Fills every layer's gw/gb for the batch last passed to forward(..., grad = true). `layer_done`,
  // when given, is called with a layer's index in params() / 2 as soon as its gradients are
  // complete (last layer first), so a data-parallel run can start reducing them.
  void backward(const float* x, int n, const std::function<void(int)>& layer_done = {});

  std::vector<ParamRef> params();

 private:
  Linear l1_, l2_, l3_;
  int max_batch_;
  std::vector<float> h1_, h2_, logits_;  // activations (after ReLU for h1, h2)
  std::vector<float> dh1_, dh2_, dlogits_;
  std::vector<float> ones_;  // bias gradient = dY^T * ones, a gemv
};

}  // namespace mlp
