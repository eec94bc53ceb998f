#include "options.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace mlp {
namespace {

constexpr const char* kUsage =
    "usage: mlp_train [options]\n"
    "Trains the Chainer MNIST MLP (784-1000-1000-10, ReLU, softmax cross-entropy, Adam) in float32\n"
    "with every matrix product in CBLAS and the Adam update in plain loops.\n"
    "\n"
    "  --steps N        training steps (default 300)\n"
    "  --epochs N       train N passes over the training set instead of --steps\n"
    "  --batch N        minibatch size (default 100)\n"
    "  --hidden N       width of both hidden layers (default 1000)\n"
    "  --seed S         seed for data, weights and shuffling (default 1)\n"
    "  --eval-every N   print training loss/accuracy every N steps (default 50, 0: never)\n"
    "  --threads N      call openblas_set_num_threads(N)\n"
    "  --mnist-dir DIR  train on MNIST idx files in DIR instead of synthetic data\n"
    "  --help           print this text\n";

[[noreturn]] void fail(const char* what, std::string_view arg) {
  std::fprintf(stderr, "mlp_train: %s: '%.*s' (see --help)\n", what, static_cast<int>(arg.size()),
               arg.data());
  std::exit(2);
}

// Parses a whole argument as an integer in [lo, hi]; anything else is a usage error.
template <typename Int>
Int parse_int(std::string_view name, std::string_view text, Int lo, Int hi) {
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < lo || value > hi) {
    std::fprintf(stderr, "mlp_train: %.*s expects an integer in [%s, %s], got '%.*s'\n",
                 static_cast<int>(name.size()), name.data(), std::to_string(lo).c_str(),
                 std::to_string(hi).c_str(), static_cast<int>(text.size()), text.data());
    std::exit(2);
  }
  return value;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    // Accept both "--name value" and "--name=value".
    std::string_view value;
    bool inline_value = false;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    auto take = [&]() -> std::string_view {
      if (inline_value) return value;
      if (i + 1 >= argc) fail("missing value for option", arg);
      return argv[++i];
    };
    constexpr long kMaxLong = 1L << 40;
    if (arg == "--steps") {
      opt.steps = parse_int<long>(arg, take(), 1, kMaxLong);
    } else if (arg == "--epochs") {
      opt.epochs = parse_int<long>(arg, take(), 1, 1L << 20);
    } else if (arg == "--batch") {
      opt.batch = parse_int<int>(arg, take(), 1, 1 << 16);
    } else if (arg == "--hidden") {
      opt.hidden = parse_int<int>(arg, take(), 1, 1 << 14);
    } else if (arg == "--seed") {
      opt.seed = parse_int<std::uint64_t>(arg, take(), 0, ~std::uint64_t{0});
    } else if (arg == "--eval-every") {
      opt.eval_every = parse_int<long>(arg, take(), 0, kMaxLong);
    } else if (arg == "--threads") {
      opt.threads = parse_int<int>(arg, take(), 1, 1024);
    } else if (arg == "--mnist-dir") {
      opt.mnist_dir = take();
      if (opt.mnist_dir.empty()) fail("empty value for option", arg);
    } else {
      fail("unknown option", argv[i]);
    }
  }
  return opt;
}

}  // namespace mlp
