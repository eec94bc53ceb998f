// mlp_train: sonde's reference workload. Trains Chainer's MNIST MLP (784-1000-1000-10, batch 100,
// Adam) with every phase marked as a sonde region, so a profile splits time into data, forward,
// backward and update, with the BLAS calls beneath them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "adam.hpp"
#include "batch_sampler.hpp"
#include "data.hpp"
#include "mlp.hpp"
#include "options.hpp"
#include "rng.hpp"
#include "sonde/sonde.h"

// Declared here rather than taken from OpenBLAS's own headers, whose cblas.h differs between
// distributions in what else it declares.
extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using namespace mlp;

// Loss and accuracy over a whole set, in chunks of at most `batch` rows.
BatchStats evaluate(Mlp& model, const Dataset& set, int batch) {
  BatchStats total;
  for (long start = 0; start < set.size(); start += batch) {
    const int n = static_cast<int>(std::min<long>(batch, set.size() - start));
    const BatchStats s = model.forward(set.image(start), set.labels.data() + start, n, false);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  if (opt.threads) openblas_set_num_threads(*opt.threads);

  const TrainTest data = load_for_training("mlp_train", opt.mnist_dir, opt.seed, opt.batch);
  const long steps = opt.epochs ? *opt.epochs * (data.train.size() / opt.batch) : opt.steps;

  // Separate streams so changing, say, the batch size leaves the initial weights alone.
  Rng init_rng(opt.seed);
  Mlp model(kImageSize, opt.hidden, kClasses, opt.batch, init_rng);
  Adam optimizer(model.params());
  // The update region is element-wise: its bytes bound what the advice may promise for it.
  sonde_region_bytes("update", optimizer.bytes_per_update());
  BatchSampler sampler(data.train.size(), opt.seed ^ 0x6A09E667F3BCC909ull);

  std::vector<float> x(static_cast<size_t>(opt.batch) * kImageSize);
  std::vector<std::int32_t> y(static_cast<size_t>(opt.batch));
  BatchStats window;  // training stats since the last printed line
  long window_samples = 0;

  const auto t0 = std::chrono::steady_clock::now();
  for (long step = 1; step <= steps; ++step) {
    sonde_region_begin("step");

    sonde_region_begin("data");
    sampler.next(data.train, opt.batch, x.data(), y.data());
    sonde_region_end("data");

    sonde_region_begin("forward");
    const BatchStats s = model.forward(x.data(), y.data(), opt.batch, true);
    sonde_region_end("forward");

    sonde_region_begin("backward");
    model.backward(x.data(), opt.batch);
    sonde_region_end("backward");

    sonde_region_begin("update");
    optimizer.update();
    sonde_region_end("update");

    sonde_region_end("step");

    window.loss_sum += s.loss_sum;
    window.correct += s.correct;
    window_samples += opt.batch;
    if (opt.eval_every > 0 && step % opt.eval_every == 0) {
      std::printf("step %ld loss %.6f train_acc %.4f\n", step, window.loss_sum / window_samples,
                  static_cast<double>(window.correct) / window_samples);
      std::fflush(stdout);  // progress shows up live even when piped
      window = {};
      window_samples = 0;
    }
  }

  sonde_region_begin("evaluate");
  const BatchStats test = evaluate(model, data.test, opt.batch);
  sonde_region_end("evaluate");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("final loss %.6f test_acc %.4f\n", test.loss_sum / data.test.size(),
              static_cast<double>(test.correct) / data.test.size());
  std::fflush(stdout);
  // On stderr so that stdout stays identical between runs and with or without the profiler.
  std::fprintf(stderr, "time_s %.3f\n", seconds);
  return 0;
}
