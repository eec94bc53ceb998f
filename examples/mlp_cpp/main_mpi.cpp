// mlp_train_mpi: the reference workload, data-parallel over MPI ranks as ChainerMN runs it. Every
// rank draws the same global batch, trains on its share of the rows, and the gradients are summed
// with MPI_Allreduce (each rank's loss gradient is already divided by the global batch size), so
// every rank takes the step the single-process mlp_train takes for the same global batch: the
// printed loss and accuracy are the same to the printed digits. --overlap starts a nonblocking
// MPI_Iallreduce for each layer as soon as backward has its gradients, overlapping it with the
// rest of backward, and waits for all of them before the update.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "adam.hpp"
#include "batch_sampler.hpp"
#include "data.hpp"
#include "mlp.hpp"
#include "options.hpp"
#include "rng.hpp"
#include "sonde/sonde.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using namespace mlp;

struct Shard {
  int lo, n;  // this rank's rows of a batch of `total`
};
Shard shard_of(int total, int rank, int ranks) {
  const int lo = static_cast<int>(static_cast<long>(total) * rank / ranks);
  const int hi = static_cast<int>(static_cast<long>(total) * (rank + 1) / ranks);
  return {lo, hi - lo};
}

// Loss and hits summed over every rank, as doubles (one reduction).
BatchStats sum_over_ranks(const BatchStats& local) {
  double in[2] = {local.loss_sum, static_cast<double>(local.correct)}, out[2];
  MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return {out[0], static_cast<long>(out[1])};
}

// The test set split over the ranks, each evaluating its rows in chunks of at most `batch`.
BatchStats evaluate(Mlp& model, const Dataset& set, int batch, int rank, int ranks) {
  const Shard s = shard_of(static_cast<int>(set.size()), rank, ranks);
  BatchStats total;
  for (long start = s.lo; start < s.lo + s.n; start += batch) {
    const int n = static_cast<int>(std::min<long>(batch, s.lo + s.n - start));
    const BatchStats b = model.forward(set.image(start), set.labels.data() + start, n, false);
    total.loss_sum += b.loss_sum;
    total.correct += b.correct;
  }
  return sum_over_ranks(total);
}

}  // namespace

int main(int argc, char** argv) {
  // --overlap is this program's own; the rest are mlp_train's options.
  bool overlap = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--overlap") == 0)
      overlap = true;
    else
      args.push_back(argv[i]);
  }
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Options opt = parse_options(static_cast<int>(args.size()), args.data());
  if (opt.threads) openblas_set_num_threads(*opt.threads);
  if (opt.batch < ranks) {
    if (rank == 0)
      std::fprintf(stderr, "mlp_train_mpi: --batch %d is below %d ranks\n", opt.batch, ranks);
    MPI_Finalize();
    return 2;
  }

  const TrainTest data = load_for_training("mlp_train_mpi", opt.mnist_dir, opt.seed, opt.batch);
  const long steps = opt.epochs ? *opt.epochs * (data.train.size() / opt.batch) : opt.steps;
  const Shard mine = shard_of(opt.batch, rank, ranks);

  Rng init_rng(opt.seed);  // the same weights on every rank
  Mlp model(kImageSize, opt.hidden, kClasses, std::max(opt.batch, mine.n), init_rng);
  std::vector<ParamRef> params = model.params();
  Adam optimizer(params);
  sonde_region_bytes("update", optimizer.bytes_per_update());
  BatchSampler sampler(data.train.size(), opt.seed ^ 0x6A09E667F3BCC909ull);

  std::vector<float> x(static_cast<size_t>(opt.batch) * kImageSize);
  std::vector<std::int32_t> y(static_cast<size_t>(opt.batch));
  BatchStats window;
  long window_samples = 0;
  std::vector<MPI_Request> requests;

  const auto t0 = std::chrono::steady_clock::now();
  for (long step = 1; step <= steps; ++step) {
    sonde_region_begin("step");

    sonde_region_begin("data");
    sampler.next(data.train, opt.batch, x.data(), y.data());
    const float* xs = x.data() + static_cast<long>(mine.lo) * kImageSize;
    const std::int32_t* ys = y.data() + mine.lo;
    sonde_region_end("data");

    sonde_region_begin("forward");
    const BatchStats s = model.forward(xs, ys, mine.n, true, opt.batch);
    sonde_region_end("forward");

    sonde_region_begin("backward");
    requests.clear();
    auto reduce_layer = [&](int layer) {
      for (int k : {2 * layer, 2 * layer + 1}) {
        auto* grad = const_cast<float*>(params[k].grad);
        requests.emplace_back();
        MPI_Iallreduce(MPI_IN_PLACE, grad, static_cast<int>(params[k].size), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &requests.back());
      }
    };
    if (overlap)
      model.backward(xs, mine.n, reduce_layer);
    else
      model.backward(xs, mine.n);
    sonde_region_end("backward");

    sonde_region_begin("allreduce");
    if (overlap) {
      MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    } else {
      for (const ParamRef& p : params)
        MPI_Allreduce(MPI_IN_PLACE, const_cast<float*>(p.grad), static_cast<int>(p.size), MPI_FLOAT,
                      MPI_SUM, MPI_COMM_WORLD);
    }
    sonde_region_end("allreduce");

    sonde_region_begin("update");
    optimizer.update();
    sonde_region_end("update");

    sonde_region_end("step");

    window.loss_sum += s.loss_sum;
    window.correct += s.correct;
    window_samples += opt.batch;
    if (opt.eval_every > 0 && step % opt.eval_every == 0) {
      const BatchStats all = sum_over_ranks(window);
      if (rank == 0) {
        std::printf("step %ld loss %.6f train_acc %.4f\n", step, all.loss_sum / window_samples,
                    static_cast<double>(all.correct) / window_samples);
        std::fflush(stdout);
      }
      window = {};
      window_samples = 0;
    }
  }

  sonde_region_begin("evaluate");
  const BatchStats test = evaluate(model, data.test, opt.batch, rank, ranks);
  sonde_region_end("evaluate");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0) {
    std::printf("final loss %.6f test_acc %.4f\n", test.loss_sum / data.test.size(),
                static_cast<double>(test.correct) / data.test.size());
    std::fflush(stdout);
    std::fprintf(stderr, "time_s %.3f ranks %d\n", seconds, ranks);
  }
  MPI_Finalize();
  return 0;
}
