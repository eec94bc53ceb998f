#include "mlp.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mlp {
namespace {

// y[n x out] = x[n x in] W^T + b: the bias rows go in first so the gemm accumulates onto them.
void linear_forward(const Linear& l, const float* x, int n, float* y) {
  for (int r = 0; r < n; ++r) std::copy(l.b.begin(), l.b.end(), y + static_cast<long>(r) * l.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, l.out, l.in, 1.0f, x, l.in, l.w.data(),
              l.in, 1.0f, y, l.out);
}

// gW = dY^T x, gb = dY^T 1, and (when dx is wanted) dx = dY W.
void linear_backward(Linear& l, const float* x, const float* dy, int n, const float* ones,
                     float* dx) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l.out, l.in, n, 1.0f, dy, l.out, x, l.in,
              0.0f, l.gw.data(), l.in);
  cblas_sgemv(CblasRowMajor, CblasTrans, n, l.out, 1.0f, dy, l.out, ones, 1, 0.0f, l.gb.data(), 1);
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, l.in, l.out, 1.0f, dy, l.out,
                l.w.data(), l.in, 0.0f, dx, l.in);
  }
}

void relu(float* y, long count) {
  for (long i = 0; i < count; ++i) y[i] = std::max(y[i], 0.0f);
}

// Backward of ReLU given its output: the gradient passes where the unit was active.
void relu_backward(const float* y, float* dy, long count) {
  for (long i = 0; i < count; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace

Linear::Linear(int in_size, int out_size, Rng& rng)
    : in(in_size),
      out(out_size),
      w(static_cast<size_t>(in_size) * out_size),
      b(static_cast<size_t>(out_size), 0.0f),
      gw(w.size(), 0.0f),
      gb(b.size(), 0.0f) {
  // Chainer's default initializer for L.Linear: LeCunNormal, N(0, 1/in), zero bias.
  const double scale = std::sqrt(1.0 / in_size);
  for (auto& v : w) v = static_cast<float>(scale * rng.normal());
}

Mlp::Mlp(int in_size, int hidden, int classes, int max_batch, Rng& rng)
    : l1_(in_size, hidden, rng),
      l2_(hidden, hidden, rng),
      l3_(hidden, classes, rng),
      max_batch_(max_batch),
      h1_(static_cast<size_t>(max_batch) * hidden),
      h2_(h1_.size()),
      logits_(static_cast<size_t>(max_batch) * classes),
      dh1_(h1_.size()),
      dh2_(h2_.size()),
      dlogits_(logits_.size()),
      ones_(static_cast<size_t>(max_batch), 1.0f) {}

BatchStats Mlp::forward(const float* x, const std::int32_t* labels, int n, bool grad,
                        int mean_over) {
  const int denominator = mean_over > 0 ? mean_over : n;
  if (n > max_batch_) throw std::logic_error("batch larger than the buffers");
  linear_forward(l1_, x, n, h1_.data());
  relu(h1_.data(), static_cast<long>(n) * l1_.out);
  linear_forward(l2_, h1_.data(), n, h2_.data());
  relu(h2_.data(), static_cast<long>(n) * l2_.out);
  linear_forward(l3_, h2_.data(), n, logits_.data());

  // Softmax cross-entropy row by row, shifted by the row maximum so exp cannot overflow.
  BatchStats stats;
  const int classes = l3_.out;
  for (int r = 0; r < n; ++r) {
    const float* z = logits_.data() + static_cast<long>(r) * classes;
    const float* best = std::max_element(z, z + classes);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - *best));
    const double log_sum = std::log(sum);
    stats.loss_sum += log_sum - (z[labels[r]] - *best);
    stats.correct += (best - z) == labels[r] ? 1 : 0;
    if (grad) {
      // d(mean loss)/dz = (softmax - onehot) / n
      float* dz = dlogits_.data() + static_cast<long>(r) * classes;
      for (int c = 0; c < classes; ++c) {
        const double p = std::exp(static_cast<double>(z[c] - *best) - log_sum);
        dz[c] = static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) / denominator);
      }
    }
  }
  return stats;
}

void Mlp::backward(const float* x, int n, const std::function<void(int)>& layer_done) {
  linear_backward(l3_, h2_.data(), dlogits_.data(), n, ones_.data(), dh2_.data());
  if (layer_done) layer_done(2);
  relu_backward(h2_.data(), dh2_.data(), static_cast<long>(n) * l2_.out);
  linear_backward(l2_, h1_.data(), dh2_.data(), n, ones_.data(), dh1_.data());
  if (layer_done) layer_done(1);
  relu_backward(h1_.data(), dh1_.data(), static_cast<long>(n) * l1_.out);
  // The input needs no gradient, which saves the largest dx product.
  linear_backward(l1_, x, dh1_.data(), n, ones_.data(), nullptr);
  if (layer_done) layer_done(0);
}

std::vector<ParamRef> Mlp::params() {
  std::vector<ParamRef> refs;
  for (Linear* l : {&l1_, &l2_, &l3_}) {
    refs.push_back({l->w.data(), l->gw.data(), l->w.size()});
    refs.push_back({l->b.data(), l->gb.data(), l->b.size()});
  }
  return refs;
}

}  // namespace mlp
