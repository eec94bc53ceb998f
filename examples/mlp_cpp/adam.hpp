// Adam as in Chainer's optimizers/adam.py (update_core_cpu), one element at a time.
#pragma once

#include <vector>

#include "mlp.hpp"

namespace mlp {

struct AdamConfig {
  double alpha = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

class Adam {
 public:
  Adam(std::vector<ParamRef> params, AdamConfig config = {});

  // One optimizer step over every parameter, using the gradients the last backward pass left.
  void update();

  // What one update() moves to and from memory: it reads each parameter, its gradient and both
  // moments and writes the parameter and the moments, 7 floats per parameter.
  unsigned long long bytes_per_update() const;

 private:
  std::vector<ParamRef> params_;
  AdamConfig config_;
  std::vector<std::vector<float>> m_, v_;  // first and second moment per parameter array
  long t_ = 0;
};

}  // namespace mlp
