// cnn_train (examples/cnn_cudnn): sonde's GPU reference workload. Trains a small CNN with cuDNN
// and cuBLAS called directly (no framework), every phase a sonde region, so a profile shows the
// library calls, their kernels and the host-device copies under data, h2d, forward, loss,
// backward and update.
#include <chrono>
#include <cstdio>
#include <vector>

#include "batch_sampler.hpp"
#include "cnn.hpp"
#include "data.hpp"
#include "options.hpp"
#include "sonde/sonde.h"

namespace {

// Loss and accuracy over a whole set in full batches; the last one is padded with the set's
// first images, which are not scored.
cnn::BatchStats evaluate(cnn::Cnn& model, const mlp::Dataset& set) {
  const int batch = model.batch();
  std::vector<float> x(std::size_t(batch) * mlp::kImageSize);
  std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
  cnn::BatchStats total;
  for (long start = 0; start < set.size(); start += batch) {
    const int count = static_cast<int>(std::min<long>(batch, set.size() - start));
    for (int r = 0; r < batch; ++r) {
      const long i = r < count ? start + r : r - count;
      std::copy_n(set.image(i % set.size()), mlp::kImageSize,
                  x.data() + std::size_t(r) * mlp::kImageSize);
      y[std::size_t(r)] = set.labels[std::size_t(i % set.size())];
    }
    const cnn::BatchStats s = model.score(x.data(), y.data(), count);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const cnn::Options opt = cnn::parse_options(argc, argv);
  const mlp::TrainTest data =
      mlp::load_for_training("cnn_train", opt.mnist_dir, opt.seed, opt.batch);
  try {
    mlp::Rng init_rng(opt.seed);
    cnn::Cnn model(opt.batch, init_rng);
    mlp::BatchSampler sampler(data.train.size(), opt.seed ^ 0x6A09E667F3BCC909ull);
    std::vector<float> x(std::size_t(opt.batch) * mlp::kImageSize);
    std::vector<std::int32_t> y(std::size_t(opt.batch));
    cnn::BatchStats window;
    long window_samples = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (long step = 1; step <= opt.steps; ++step) {
      sonde_region_begin("step");
      sonde_region_begin("data");
      sampler.next(data.train, opt.batch, x.data(), y.data());
      sonde_region_end("data");
      const cnn::BatchStats s = model.train_step(x.data(), y.data(), opt.lr, opt.momentum);
      sonde_region_end("step");
      window.loss_sum += s.loss_sum;
      window.correct += s.correct;
      window_samples += opt.batch;
      if (opt.eval_every > 0 && step % opt.eval_every == 0) {
        std::printf("step %ld loss %.6f train_acc %.4f\n", step, window.loss_sum / window_samples,
                    static_cast<double>(window.correct) / window_samples);
        std::fflush(stdout);
        window = {};
        window_samples = 0;
      }
    }
    sonde_region_begin("evaluate");
    const cnn::BatchStats test = evaluate(model, data.test);
    sonde_region_end("evaluate");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("final loss %.6f test_acc %.4f\n", test.loss_sum / data.test.size(),
                static_cast<double>(test.correct) / data.test.size());
    std::fflush(stdout);
    std::fprintf(stderr, "time_s %.3f\n", seconds);
  } catch (const cnn::GpuError& e) {
    std::fprintf(stderr, "cnn_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
