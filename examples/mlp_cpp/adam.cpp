#include "adam.hpp"

#include <cmath>
#include <cstddef>

namespace mlp {

Adam::Adam(std::vector<ParamRef> params, AdamConfig config)
    : params_(std::move(params)), config_(config) {
  for (const auto& p : params_) {
    m_.emplace_back(p.size, 0.0f);
    v_.emplace_back(p.size, 0.0f);
  }
}

unsigned long long Adam::bytes_per_update() const {
  unsigned long long n = 0;
  for (const auto& p : params_) n += p.size;
  return 7 * sizeof(float) * n;
}

void Adam::update() {
  ++t_;
  // Chainer's alpha_t: the bias corrections of both moments folded into one step size.
  const double fix1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t_));
  const double fix2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t_));
  const auto alpha_t = static_cast<float>(config_.alpha * std::sqrt(fix2) / fix1);
  const auto one_minus_beta1 = static_cast<float>(1.0 - config_.beta1);
  const auto one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
  const auto eps = static_cast<float>(config_.eps);

  // Deliberately plain loops, not BLAS: this is the memory-bound, sqrt-heavy phase that the
  // K-computer study found taking most of Chainer's time, and the profiler should find it here too.
  for (std::size_t k = 0; k < params_.size(); ++k) {
    float* param = params_[k].data;
    const float* grad = params_[k].grad;
    float* m = m_[k].data();
    float* v = v_[k].data();
    for (std::size_t i = 0; i < params_[k].size; ++i) {
      const float g = grad[i];
      m[i] += one_minus_beta1 * (g - m[i]);
      v[i] += one_minus_beta2 * (g * g - v[i]);
      param[i] -= alpha_t * m[i] / (std::sqrt(v[i]) + eps);
    }
  }
}

}  // namespace mlp
