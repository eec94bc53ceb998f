#include "metrics/blas_kernels.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>
#include <vector>

namespace sonde::analyzers {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

// OpenBLAS's x86-64 cores (its TARGET list and DYNAMIC_ARCH's corenames, lower-cased) and the
// widest vectors their GEMM kernels use. Sandybridge and the AMD cores before Zen use AVX
// without FMA3 (Bulldozer's FMA4 aside); Haswell and Zen AVX2 with FMA3; SkylakeX, Cooperlake
// and Sapphire Rapids AVX-512.
constexpr std::array<std::pair<std::string_view, std::string_view>, 26> kCores = {{
    {"katmai", "sse"},
    {"coppermine", "sse"},
    {"northwood", "sse"},
    {"prescott", "sse"},
    {"banias", "sse"},
    {"core2", "sse"},
    {"penryn", "sse"},
    {"dunnington", "sse"},
    {"nehalem", "sse"},
    {"atom", "sse"},
    {"opteron", "sse"},
    {"opteron_sse3", "sse"},
    {"barcelona", "sse"},
    {"bobcat", "sse"},
    {"nano", "sse"},
    {"sandybridge", "avx"},
    {"bulldozer", "avx"},
    {"piledriver", "avx"},
    {"steamroller", "avx"},
    {"excavator", "avx"},
    {"haswell", "avx2"},
    {"zen", "avx2"},
    {"skylakex", "avx512"},
    {"cooperlake", "avx512"},
    {"sapphirerapids", "avx512"},
    {"skylake", "avx2"},
}};

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = s.find(' ', i);
    if (j == std::string_view::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::optional<BlasKernels> openblas_kernels(std::string_view config) {
  std::vector<std::string_view> w = words(config);
  if (w.empty() || w[0] != "OpenBLAS") return std::nullopt;
  // The core is the word before MAX_THREADS=N (every release since 0.2 writes it there).
  BlasKernels k;
  for (std::size_t i = 1; i < w.size(); ++i) {
    if (w[i] == "DYNAMIC_ARCH") k.dynamic_arch = true;
    if (w[i].starts_with("MAX_THREADS=") && i >= 2 &&
        w[i - 1].find('=') == std::string_view::npos && !w[i - 1].starts_with("NO_") &&
        w[i - 1] != "DYNAMIC_ARCH" && w[i - 1] != "USE64BITINT")
      k.core = std::string(w[i - 1]);
  }
  if (k.core.empty()) return std::nullopt;
  std::string key = lower(k.core);
  for (auto [core, isa] : kCores)
    if (key == core) k.isa = std::string(isa);
  return k;
}

int vector_bits(std::string_view isa) {
  if (isa == "sse") return 128;
  if (isa == "avx" || isa == "avx2") return 256;
  if (isa == "avx512") return 512;
  return 0;
}

std::string coretype_for(std::string_view isa) {
  if (isa == "avx512") return "SkylakeX";
  if (isa == "avx2") return "Haswell";
  if (isa == "avx") return "Sandybridge";
  return "";
}

bool kernels_narrower(const BlasKernels& kernels, std::string_view cpu_isa) {
  int have = vector_bits(kernels.isa), could = vector_bits(cpu_isa);
  return have > 0 && could > have;
}

}  // namespace sonde::analyzers
