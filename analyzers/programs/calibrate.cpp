// `sonde calibrate`: the peaks file (read, merge, write) and the measurements behind it.
//
// GEMM goes through the system BLAS, opened with dlopen("libblas.so.3") so that sonde measures
// the library the profiled programs load (Debian's alternatives pick it) without linking it,
// or through the one --blas names (a program that brings its own).
// Memory bandwidth is a STREAM triad, a[i] = b[i] + s * c[i], counted as STREAM does: 24 bytes
// per element (read b and c, write a; the write-allocate read is not counted).
#include "programs/calibrate.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "base/output_file.hpp"
#include "metrics/blas_kernels.hpp"
#include "profile/profile_file.hpp"
#include "sonde/vector_isa.hpp"

namespace sonde::analyzers {
namespace {

namespace fs = std::filesystem;
constexpr int kUsageError = 2;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool known_resource(std::string_view r) {
  const auto& all = peak_resources();
  return std::find(all.begin(), all.end(), r) != all.end();
}

std::string threads_label(int threads, bool words) {
  if (threads == 0) return words ? "all threads" : "all";
  if (!words) return std::to_string(threads);
  return threads == 1 ? "1 thread" : fmt::format("{} threads", threads);
}

std::string host_and_date() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown-host");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
  return fmt::format("{} {}", host, date);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- GEMM through the system BLAS -------------------------------------------------------------

constexpr int kRowMajor = 101, kNoTrans = 111;  // CBLAS_ORDER, CBLAS_TRANSPOSE
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*,
                         int, double, double*, int);

struct Blas {
  void* handle = nullptr;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  void (*openblas_set)(int) = nullptr;
  int (*openblas_get)() = nullptr;
  void (*blis_set)(long) = nullptr;
  std::string description;
  std::string config;  // openblas_get_config(), where it is an OpenBLAS

  bool can_set_threads() const { return openblas_set || blis_set; }
  void set_threads(int n) const {
    if (openblas_set)
      openblas_set(n);
    else if (blis_set)
      blis_set(n);
  }
};

Blas load_blas(int all_threads, const std::string& library) {
  // Size OpenBLAS's (or an OpenMP build's) thread pool for every CPU before it initialises;
  // the 1-thread figures then come from openblas_set_num_threads(1).
  std::string n = std::to_string(all_threads);
  setenv("OPENBLAS_NUM_THREADS", n.c_str(), 1);
  setenv("OMP_NUM_THREADS", n.c_str(), 1);
  const char* name = library.c_str();
  Blas b;
  b.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!b.handle) {
    const char* why = dlerror();
    throw Error(fmt::format("cannot load the BLAS {}: {}", name, why ? why : "?"));
  }
  // The handle's lookup scope includes its dependencies: Debian's libblas.so.3 for OpenBLAS is a
  // thin library over libopenblas.so.0, where openblas_set_num_threads lives.
  b.sgemm = reinterpret_cast<SgemmFn>(dlsym(b.handle, "cblas_sgemm"));
  b.dgemm = reinterpret_cast<DgemmFn>(dlsym(b.handle, "cblas_dgemm"));
  if (!b.sgemm || !b.dgemm)
    throw Error(
        fmt::format("{} has no cblas_sgemm / cblas_dgemm (a BLAS without the C "
                    "interface); install OpenBLAS (libopenblas0) or another CBLAS",
                    name));
  b.openblas_set = reinterpret_cast<void (*)(int)>(dlsym(b.handle, "openblas_set_num_threads"));
  b.openblas_get = reinterpret_cast<int (*)()>(dlsym(b.handle, "openblas_get_num_threads"));
  b.blis_set = reinterpret_cast<void (*)(long)>(dlsym(b.handle, "bli_thread_set_num_threads"));

  std::string path = name;
  link_map* lm = nullptr;
  if (dlinfo(b.handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) {
    std::error_code ec;
    fs::path real = fs::canonical(lm->l_name, ec);
    path = ec ? std::string(lm->l_name) : real.string();
  }
  auto config = reinterpret_cast<const char* (*)()>(dlsym(b.handle, "openblas_get_config"));
  if (config && config()) b.config = config();
  b.description = b.config.empty() ? path : fmt::format("{} ({})", path, b.config);
  return b;
}

template <typename T>
std::vector<T> test_matrix(int n, unsigned seed) {
  std::vector<T> m(static_cast<std::size_t>(n) * n);
  unsigned x = seed;
  for (T& v : m) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<T>((x >> 8) & 0xffff) / T(65536) - T(0.5);
  }
  return m;
}

// A measured rate: the best repeat's, and how far the median repeat fell below it (%).
struct Rate {
  double best = 0;
  double spread_pct = 0;
};

// From the repeats' times (seconds) and the work of one repeat (FLOPs, bytes).
Rate rate_of(std::vector<double> times, double work) {
  if (times.empty()) return {};
  std::sort(times.begin(), times.end());
  double best = times.front(), median = times[times.size() / 2];
  if (best <= 0) return {};
  return {work / best / 1e9, 100.0 * (1.0 - best / median)};
}

// The rate of repeated calls doing `work` each, after one untimed call: at least min_reps of
// them and a second (a quarter with --quick), at most 200. `call` false: the call failed.
template <typename Call>
Rate time_repeats(Call call, double work, bool quick) {
  if (!call()) return {};
  const int min_reps = quick ? 3 : 5, max_reps = 200;
  const double min_time = quick ? 0.25 : 1.0;
  std::vector<double> times;
  auto start = std::chrono::steady_clock::now();
  for (int rep = 0; rep < max_reps && (rep < min_reps || seconds_since(start) < min_time); ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    if (!call()) return {};
    times.push_back(seconds_since(t0));
  }
  return rate_of(std::move(times), work);
}

// GFLOP/s of repeated n x n x n GEMMs, after one untimed call.
template <typename T, typename Fn>
Rate time_gemm(Fn gemm, int n, bool quick) {
  std::vector<T> a = test_matrix<T>(n, 1), b = test_matrix<T>(n, 2);
  std::vector<T> c(static_cast<std::size_t>(n) * n, T(0));
  Rate r = time_repeats(
      [&] {
        gemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, T(1), a.data(), n, b.data(), n, T(0), c.data(),
             n);
        return true;
      },
      2.0 * n * n * static_cast<double>(n), quick);
  return std::isfinite(c[0]) ? r : Rate{};
}

// ---- bfloat16 GEMM through oneDNN --------------------------------------------------------------

// torch.autocast's bfloat16 matrix products run in oneDNN (on its AMX kernels where the CPU has
// them), not in the BLAS: 1,726 GFLOP/s here against OpenBLAS's float32 420-440 at 2 threads.
// gemm.bf16 is oneDNN's bfloat16 x bfloat16 -> float32 GEMM of its C API, row-major.
using Bf16GemmFn = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float,
                           const std::uint16_t*, std::int64_t, const std::uint16_t*, std::int64_t,
                           float, float*, std::int64_t);

struct Onednn {
  Bf16GemmFn gemm = nullptr;
  void (*omp_set_threads)(int) = nullptr;  // its OpenMP runtime's, where it has one
  std::string name;
};

std::optional<Onednn> load_onednn() {
  for (const char* name : {"libdnnl.so.3", "libdnnl.so.2"}) {
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) continue;
    Onednn d;
    d.gemm = reinterpret_cast<Bf16GemmFn>(dlsym(h, "dnnl_gemm_bf16bf16f32"));
    d.omp_set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads"));
    d.name = name;
    if (d.gemm != nullptr) return d;
    dlclose(h);
  }
  return std::nullopt;
}

Rate time_bf16_gemm(const Onednn& d, int n, bool quick) {
  auto to_bf16 = [](const std::vector<float>& m) {  // the upper half of each float's bits
    std::vector<std::uint16_t> out(m.size());
    for (std::size_t i = 0; i < m.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(m[i]) >> 16;
    return out;
  };
  std::vector<std::uint16_t> a = to_bf16(test_matrix<float>(n, 1)),
                             b = to_bf16(test_matrix<float>(n, 2));
  std::vector<float> c(static_cast<std::size_t>(n) * n, 0.0f);
  Rate r = time_repeats(
      [&] {
        return d.gemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) == 0;
      },
      2.0 * n * n * static_cast<double>(n), quick);
  return std::isfinite(c[0]) ? r : Rate{};
}

// ---- STREAM triad ------------------------------------------------------------------------------

// The combined size of the last-level caches: each distinct L3 (else L2) instance counted once.
std::size_t last_level_cache_bytes(int cpus) {
  for (int level : {3, 2}) {
    std::set<std::string> seen;
    std::size_t total = 0;
    for (int cpu = 0; cpu < cpus; ++cpu) {
      for (int index = 0; index < 8; ++index) {
        fs::path dir = fmt::format("/sys/devices/system/cpu/cpu{}/cache/index{}", cpu, index);
        std::ifstream lf(dir / "level");
        int l = 0;
        if (!(lf >> l)) break;
        if (l != level) continue;
        std::string shared, size;
        std::ifstream(dir / "shared_cpu_list") >> shared;
        std::ifstream(dir / "size") >> size;
        if (!seen.insert(shared).second) continue;
        std::size_t bytes = std::strtoull(size.c_str(), nullptr, 10);
        if (!size.empty() && size.back() == 'K') bytes <<= 10;
        if (!size.empty() && size.back() == 'M') bytes <<= 20;
        total += bytes;
      }
    }
    if (total > 0) return total;
  }
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? static_cast<std::size_t>(l3) : 0;
}

struct FreeDeleter {
  void operator()(double* p) const { std::free(p); }
};
using Array = std::unique_ptr<double[], FreeDeleter>;

Array allocate(std::size_t elements) {
  std::size_t bytes = (elements * sizeof(double) + 63) / 64 * 64;
  auto* p = static_cast<double*>(std::aligned_alloc(64, bytes));
  if (!p) throw Error(fmt::format("cannot allocate {} MiB for the bandwidth test", bytes >> 20));
  return Array(p);
}

// Runs body(lo, hi) on `threads` std::threads over equal slices of [0, n).
template <typename Body>
void parallel_slices(int threads, std::size_t n, Body body) {
  if (threads <= 1) return body(std::size_t{0}, n);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(body, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

struct Triad {
  std::size_t n = 0;
  Array a, b, c;
};

Triad make_triad(int cpus) {
  const std::size_t llc = last_level_cache_bytes(cpus);
  std::size_t bytes = std::max<std::size_t>(std::size_t{64} << 20, 4 * llc);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0)  // the three arrays take at most 3/8 of the memory
    bytes = std::min<std::size_t>(bytes, static_cast<std::size_t>(pages) * page / 8);
  Triad t;
  t.n = bytes / sizeof(double);
  t.a = allocate(t.n);
  t.b = allocate(t.n);
  t.c = allocate(t.n);
  // First touch by the threads that will use each slice (pages land on their NUMA node).
  parallel_slices(cpus, t.n, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      t.a[i] = 0.0;
      t.b[i] = 1.0;
      t.c[i] = 2.0;
    }
  });
  return t;
}

// GB/s over the passes, 24 bytes per element per pass.
Rate time_triad(Triad& t, int threads, int passes) {
  const double s = 3.0;
  std::vector<double> times;
  for (int pass = 0; pass < passes; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    parallel_slices(threads, t.n, [&](std::size_t lo, std::size_t hi) {
      double* __restrict a = t.a.get();
      const double* __restrict b = t.b.get();
      const double* __restrict c = t.c.get();
      for (std::size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
    });
    times.push_back(seconds_since(t0));
  }
  // Read the result back so that no pass can be optimised away, and catch a broken loop.
  if (t.a[0] != 7.0 || t.a[t.n - 1] != 7.0) return {};
  return rate_of(std::move(times), 24.0 * static_cast<double>(t.n));
}

// ---- plausibility ------------------------------------------------------------------------------

// A machine busy with other work gives figures that are too low, and unevenly so: at load 40 a
// 2-thread triad read 2.0 GB/s against 4.9 for 1 thread. A resource's figures are re-measured
// while they fail these checks, at most kAttempts times in all, then refused (or, with --force,
// kept with the source `forced`).
constexpr int kAttempts = 3;
// More threads may not be slower than one by more than this (the triad's threads start and
// join each pass; a GEMM's split has its own overhead at small n).
constexpr double kSlowerTolerance = 0.10;
// The median repeat may fall this far below the best; beyond, the repeats did not see one
// steady machine (quiet, a GEMM's repeats are within a few %).
constexpr double kMaxSpreadPct = 25.0;

// Why the figures of one resource (1 thread first, then all) are not believable; "" if they are.
std::string implausible(const std::string& resource, const std::vector<Peak>& figures,
                        int all_threads) {
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : ", ") + s; };
  for (const Peak& p : figures)
    if (p.spread_pct && *p.spread_pct > kMaxSpreadPct)
      add(fmt::format("{} {}: repeats spread {:.0f} % below the best (at most {:.0f} %)", resource,
                      threads_label(p.threads, true), *p.spread_pct, kMaxSpreadPct));
  if (figures.size() == 2 && figures[1].value < (1.0 - kSlowerTolerance) * figures[0].value)
    add(fmt::format("{} with {} threads {:.1f} {} below 1 thread's {:.1f}", resource, all_threads,
                    figures[1].value, peak_unit(resource), figures[0].value));
  return why;
}

// The 1-minute load average, as /proc/loadavg has it; none where it cannot be read.
std::optional<double> load_average() {
  std::ifstream f("/proc/loadavg");
  double load = 0;
  if (!(f >> load)) return std::nullopt;
  return load;
}

double round1(double v) { return std::round(v * 10.0) / 10.0; }

}  // namespace

const std::vector<std::string>& peak_resources() {
  static const std::vector<std::string> all = {"gemm.f32", "gemm.f64", "gemm.bf16", "mem.bw"};
  return all;
}

std::string peak_unit(std::string_view resource) {
  if (resource.starts_with("gemm.")) return "GFLOP/s";
  if (resource == "mem.bw") return "GB/s";
  return "";
}

std::string default_peaks_path() {
  if (std::string p = env("SONDE_PEAKS"); !p.empty()) return p;
  // As libsonde's reader (libprof/src/runtime/config.cpp) resolves it.
  if (std::string p = default_peaks_location(std::getenv); !p.empty()) return p;
  throw Error("no place for the peaks file: set SONDE_PEAKS (or HOME), or give --output FILE");
}

PeaksFile parse_peaks(std::istream& in) {
  std::ostringstream text;
  text << in.rdbuf();
  return sonde::parse_peaks(text.str());
}

PeaksFile read_peaks_file(const std::string& path) {
  PeaksFile file;
  std::string error;
  if (!sonde::read_peaks_file(path, file, error)) throw Error(error);
  return file;
}

Peak parse_peak_setting(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("bad --set '{}': {}; expected RESOURCE[@THREADS]=VALUE, e.g. "
                             "gemm.f32=1200 or gemm.f64@1=37.5 (RESOURCE: gemm.f32, gemm.f64, "
                             "gemm.bf16, mem.bw; THREADS: 1, or 0 = all, the default)",
                             text, why),
                 kUsageError);
  };
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) throw bad("no '='");
  std::string_view key = text.substr(0, eq), value = text.substr(eq + 1);
  std::string_view resource = key;
  int threads = 0;
  if (std::size_t at = key.find('@'); at != std::string_view::npos) {
    resource = key.substr(0, at);
    std::optional<int> t = parse_peak_threads(key.substr(at + 1));
    if (!t) throw bad("THREADS must be a whole number >= 0");
    threads = *t;
  }
  if (!known_resource(resource)) throw bad(fmt::format("unknown resource '{}'", resource));
  std::optional<double> v = parse_peak_value(value);
  if (!v) throw bad("VALUE must be a positive number");
  return Peak{std::string(resource), threads, *v, kSourceManual, std::nullopt};
}

std::vector<Peak> merge_peaks(const std::vector<Peak>& existing, const std::vector<Peak>& updates,
                              std::vector<Peak>* kept_manual) {
  std::vector<Peak> out = existing;
  for (const Peak& u : updates) {
    auto same = [&](const Peak& p) { return p.resource == u.resource && p.threads == u.threads; };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it == out.end()) {
      out.push_back(u);
      continue;
    }
    if (u.source != kSourceManual && it->source == kSourceManual) {
      if (kept_manual) kept_manual->push_back(*it);
      continue;
    }
    *it = u;
    // Duplicates of the key further down (a hand-edited file) go: the key is unique in a profile.
    out.erase(std::remove_if(it + 1, out.end(), same), out.end());
  }
  return out;
}

std::vector<Peak> sort_peaks(const std::vector<Peak>& peaks) {
  std::vector<Peak> sorted = peaks;
  auto rank = [](const Peak& p) {
    const auto& all = peak_resources();
    auto it = std::find(all.begin(), all.end(), p.resource);
    return it == all.end() ? all.size() : static_cast<std::size_t>(it - all.begin());
  };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Peak& x, const Peak& y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    if (rank(x) == peak_resources().size()) return false;     // others keep their order
    auto order = [](int t) { return t == 0 ? 1 << 30 : t; };  // 1, 2, ..., then 0 (all)
    return order(x.threads) < order(y.threads);
  });
  return sorted;
}

std::string format_peaks(const std::vector<Peak>& peaks, const std::string& written_by) {
  std::string out = fmt::format("# sonde peaks, written by {}\n", written_by);
  out +=
      "# resource threads value source [spread]; threads 0 = all; gemm.* in GFLOP/s, mem.bw "
      "in GB/s;\n# spread: % the median repeat fell below the value\n";
  for (const Peak& p : sort_peaks(peaks)) {
    out += fmt::format("{} {} {} {}", p.resource, p.threads, p.value, p.source);
    out += p.spread_pct ? fmt::format(" {}\n", *p.spread_pct) : "\n";
  }
  return out;
}

Table peaks_table(const std::vector<Peak>& peaks, bool words) {
  Table t;
  t.columns = {{"resource", "resource"}, {"threads", "threads"}, {"value", "value", 1},
               {"unit", "unit"},         {"source", "source"},   {"spread %", "spread_pct", 1}};
  for (const Peak& p : peaks)
    t.rows.push_back({p.resource, words ? Cell(threads_label(p.threads, false)) : Cell(p.threads),
                      p.value, peak_unit(p.resource), p.source,
                      p.spread_pct ? Cell(*p.spread_pct) : Cell(std::monostate{})});
  return t;
}

void check_peaks_writable(const std::string& path) {
  fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec))
    throw Error(fmt::format("cannot write {}: it is a directory", path));
  fs::path dir = target.parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec)
      throw Error(
          fmt::format("cannot write {}: cannot create {}: {}", path, dir.string(), ec.message()));
  }
  fs::path probe = target;
  probe += fmt::format(".tmp{}", getpid());
  {
    std::ofstream f(probe);
    if (!f) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  fs::remove(probe, ec);
}

void write_peaks_file(const std::string& path, const std::string& text) {
  check_peaks_writable(path);
  if (written_through(path)) {  // /dev/null, /dev/stdout, a link (base/output_file.hpp)
    std::ofstream f(path, std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw Error(fmt::format("writing {} failed", path));
    return;
  }
  fs::path tmp = path;
  tmp += fmt::format(".tmp{}", getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(fmt::format("writing {} failed", tmp.string()));
    }
  }
  // Renamed into place, so that a program starting meanwhile reads the old file or the new one.
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

// This process's arguments as the kernel has them (the command's own are parsed already).
std::vector<std::string> own_arguments() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(f, arg, '\0')) args.push_back(arg);
  return args;
}

// CalibrateOptions::cpu_kernels: returns only where it did not start again (kernels as wide as
// the CPU's, no OpenBLAS, OPENBLAS_CORETYPE set, or the exec failed: said in a warning).
void measure_with_cpu_kernels(const Blas& blas, Calibration& cal) {
  auto kernels = openblas_kernels(blas.config);
  const char* isa = vector_isa();
  if (!kernels || !isa || !kernels->dynamic_arch || !kernels_narrower(*kernels, isa) ||
      !env("OPENBLAS_CORETYPE").empty())
    return;
  std::string core = coretype_for(isa);
  std::vector<std::string> args = own_arguments();
  if (core.empty() || args.empty()) return;
  std::cerr << fmt::format(
      "sonde calibrate: OpenBLAS chose its {} kernels ({}-bit vectors) on this CPU of {}-bit "
      "ones; measuring with OPENBLAS_CORETYPE={}, the CPU's own, so that the peaks are the "
      "machine's (programs on the default kernels reach less of them: `sonde candidates` "
      "says so, rule blas-kernels)\n",
      kernels->core, vector_bits(kernels->isa), vector_bits(isa), core);
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  int err = errno;
  unsetenv("OPENBLAS_CORETYPE");
  cal.warnings.push_back(fmt::format(
      "could not start again with OPENBLAS_CORETYPE={} ({}): the GEMM peaks are those of "
      "OpenBLAS's {} kernels, narrower than this CPU's",
      core, std::strerror(err), kernels->core));
}

// gemm.bf16 where the CPU computes in bfloat16 (cpu_bf16) and oneDNN is installed, and only
// where its figures pass the checks: a warning otherwise, never a refusal of the others (no
// float32 or float64 figure depends on it; the `bfloat16` rule then takes bfloat16 as twice
// float32's rate). A oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA) has no bfloat16 GEMM to time.
template <typename Say>
void measure_bf16(const CalibrateOptions& options, Calibration& cal,
                  const std::vector<int>& thread_counts, const std::vector<int>& sizes, Say& say) {
  const char* bf16 = cpu_bf16();
  if (bf16 == nullptr) return;
  std::optional<Onednn> dnnl = load_onednn();
  if (!dnnl) {
    cal.warnings.push_back(
        fmt::format("this CPU computes in bfloat16 ({}), but oneDNN (libdnnl.so.3 or .2, with "
                    "dnnl_gemm_bf16bf16f32) was not found: no gemm.bf16 peak",
                    std::string_view(bf16) == "amx" ? "AMX" : "AVX512_BF16"));
    return;
  }
  if (dnnl->omp_set_threads == nullptr)
    cal.warnings.push_back(fmt::format(
        "{} has no OpenMP runtime to set its threads by: its gemm.bf16 figures for 1 thread "
        "and all threads are both measured with its own default",
        dnnl->name));
  std::vector<Peak> figures;
  std::string why;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    if (attempt > 1) say(fmt::format("measuring gemm.bf16 again ({})", why));
    figures.clear();
    why.clear();
    for (int threads : thread_counts) {
      if (dnnl->omp_set_threads) dnnl->omp_set_threads(threads);
      Rate best;
      for (int n : sizes) {
        say(fmt::format("calibrating gemm.bf16 ({}), {}, n={} ...", dnnl->name,
                        threads_label(threads, true), n),
            false);
        Rate g = time_bf16_gemm(*dnnl, n, options.quick);
        say(g.best > 0 ? fmt::format("{:.1f} GFLOP/s", g.best) : std::string("failed"));
        if (g.best > best.best) best = g;
      }
      if (best.best <= 0) {
        cal.warnings.push_back(fmt::format(
            "{}'s dnnl_gemm_bf16bf16f32 failed or gave no usable timing: no gemm.bf16 peak",
            dnnl->name));
        return;
      }
      figures.push_back(Peak{"gemm.bf16", threads == cal.all_threads ? 0 : threads,
                             round1(best.best), kSourceCalibrated, round1(best.spread_pct)});
    }
    why = implausible("gemm.bf16", figures, cal.all_threads);
    if (why.empty()) break;
  }
  if (!why.empty() && options.force) {
    cal.doubts.push_back(why);
    for (Peak& p : figures) p.source = kSourceForced;
  } else if (!why.empty()) {
    cal.warnings.push_back(fmt::format(
        "gemm.bf16 not written: its figures failed the checks {} times ({})", kAttempts, why));
    return;
  }
  cal.peaks.insert(cal.peaks.end(), figures.begin(), figures.end());
}

Calibration run_calibration(const CalibrateOptions& options) {
  auto say = [&](const std::string& s, bool done = true) {
    if (options.progress) options.progress(s, done);
  };
  Calibration cal;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cal.all_threads = online > 0 ? static_cast<int>(online) : 1;
  Blas blas = load_blas(cal.all_threads, options.blas_library);
  if (options.cpu_kernels) measure_with_cpu_kernels(blas, cal);
  cal.blas = blas.description;
  say(fmt::format("BLAS: {}", cal.blas));
  if (!blas.can_set_threads())
    cal.warnings.push_back(
        "the BLAS offers no way to set its thread count (neither OpenBLAS nor "
        "BLIS): its GEMM figures for 1 thread and all threads are both "
        "measured with its own default");
  // Bandwidth before GEMM: after GEMMs, OpenBLAS's idle workers spin for a while and take a
  // core (measured here: 18 GB/s instead of 29 with 2 threads).
  const std::vector<int> thread_counts =
      cal.all_threads > 1 ? std::vector<int>{1, cal.all_threads} : std::vector<int>{1};
  cal.load = load_average();
  // Measures one resource at each thread count, again while its figures fail the checks.
  auto measure = [&](const std::string& resource, auto&& one) {
    std::vector<Peak> figures;
    std::string why, first_why;
    int attempt = 1;
    for (; attempt <= kAttempts; ++attempt) {
      if (attempt > 1) say(fmt::format("measuring {} again ({})", resource, why));
      figures.clear();
      for (int threads : thread_counts) {
        Rate r = one(threads);
        if (r.best <= 0) throw Error(fmt::format("{} gave no usable timing", resource));
        figures.push_back(Peak{resource, threads == cal.all_threads ? 0 : threads, round1(r.best),
                               kSourceCalibrated, round1(r.spread_pct)});
      }
      why = implausible(resource, figures, cal.all_threads);
      if (why.empty()) break;
      if (first_why.empty()) first_why = why;
    }
    if (why.empty() && attempt > 1)
      cal.warnings.push_back(
          fmt::format("{} measured {} times: {}; the last passed", resource, attempt, first_why));
    if (!why.empty()) {
      cal.doubts.push_back(why);
      for (Peak& p : figures) p.source = kSourceForced;  // kept only under --force
    }
    cal.peaks.insert(cal.peaks.end(), figures.begin(), figures.end());
  };
  {
    Triad triad = make_triad(cal.all_threads);
    const int passes = options.quick ? 5 : 20;
    measure("mem.bw", [&](int threads) {
      say(fmt::format("calibrating mem.bw, {}, triad over 3 x {} MiB ...",
                      threads_label(threads, true), (triad.n * 8) >> 20),
          false);
      Rate r = time_triad(triad, threads, passes);
      say(fmt::format("{:.1f} GB/s", r.best));
      return r;
    });
  }

  const std::vector<int> sizes =
      options.quick ? std::vector<int>{256, 512} : std::vector<int>{512, 1024, 2048};
  // Before the BLAS's GEMMs, whose idle workers spin for a while after them (as for mem.bw):
  // 2 threads of oneDNN read 67 GFLOP/s against 1,003 for one thread there.
  measure_bf16(options, cal, thread_counts, sizes, say);
  for (const std::string resource : {"gemm.f32", "gemm.f64"}) {
    measure(resource, [&](int threads) {
      blas.set_threads(threads);
      if (blas.openblas_get && blas.openblas_set && blas.openblas_get() != threads)
        cal.warnings.push_back(
            fmt::format("asked OpenBLAS for {} threads, it uses {}", threads, blas.openblas_get()));
      Rate best;
      for (int n : sizes) {
        say(fmt::format("calibrating {}, {}, n={} ...", resource, threads_label(threads, true), n),
            false);
        Rate g = resource == "gemm.f32" ? time_gemm<float>(blas.sgemm, n, options.quick)
                                        : time_gemm<double>(blas.dgemm, n, options.quick);
        say(fmt::format("{:.1f} GFLOP/s", g.best));
        if (g.best > best.best) best = g;
      }
      return best;
    });
  }
  blas.set_threads(cal.all_threads);
  if (cal.doubts.empty() && cal.load && *cal.load >= cal.all_threads)
    cal.warnings.push_back(fmt::format(
        "the machine was busy (load {:.1f} on {} CPUs): the figures passed the checks, but a "
        "quiet machine may give higher ones",
        *cal.load, cal.all_threads));

  if (cal.all_threads == 1) {
    // One CPU: "all threads" is the one-thread figure, and both lines are written.
    std::vector<Peak> all;
    for (const Peak& p : cal.peaks) {
      all.push_back(Peak{p.resource, 1, p.value, p.source, p.spread_pct});
      all.push_back(p);
    }
    cal.peaks = all;
  }
  return cal;
}

int calibrate_command(const CalibrateCommand& command) {
  std::vector<Peak> sets;
  for (const std::string& s : command.sets) sets.push_back(parse_peak_setting(s));
  const std::string path = command.output ? *command.output : default_peaks_path();

  auto load = [&](bool dropping) {
    PeaksFile file = read_peaks_file(path);
    for (const std::string& bad : file.bad_lines)
      std::cerr << fmt::format("sonde calibrate: warning: {}:{}{}\n", path, bad,
                               dropping ? ", dropped" : ", ignored");
    return file;
  };
  Format format = parse_format(command.format);
  // CSV and JSON keep stdout to the table alone (the title goes to stderr, or into the JSON).
  auto print = [&](const std::vector<Peak>& peaks, const std::string& title) {
    // As in the peaks file, csv and json give the threads as a number, 0 for all of them.
    Table table = peaks_table(sort_peaks(peaks), format == Format::kText);
    if (format == Format::kText) std::cout << title << '\n' << render_text(table);
    if (format == Format::kCsv) {
      std::cerr << title << '\n';
      std::cout << render_csv(table);
    }
    if (format == Format::kJson)
      std::cout << dump_json(Json{{"format_version", kJsonFormatVersion},
                                  {"subcommand", "calibrate"},
                                  {"peaks_file", path},
                                  {"peaks", render_json(table)}})
                << '\n';
    std::cout.flush();
  };

  if (!sets.empty()) {
    check_peaks_writable(path);  // a directory is said as such, not as an unreadable file
    std::vector<Peak> merged = merge_peaks(load(true).peaks, sets);
    write_peaks_file(
        path, format_peaks(merged, fmt::format("`sonde calibrate --set` on {}", host_and_date())));
    for (const Peak& p : sets)
      std::cerr << fmt::format("sonde calibrate: recorded {} {} = {} {} (manual) in {}\n",
                               p.resource, threads_label(p.threads, true), p.value,
                               peak_unit(p.resource), path);
    if (command.show) print(merged, fmt::format("peaks file: {}", path));
    return 0;
  }
  if (command.show) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw Error(
          fmt::format("no peaks file at {}: run sonde calibrate, or record a figure "
                      "with --set RESOURCE[@THREADS]=VALUE",
                      path));
    print(load(false).peaks, fmt::format("peaks file: {}", path));
    return 0;
  }

  check_peaks_writable(path);  // before the measuring, not after it
  PeaksFile existing = load(true);
  CalibrateOptions options;
  options.quick = command.quick;
  options.blas_library = command.blas;
  options.cpu_kernels = true;
  options.force = command.force;
  // Progress on a terminal only: a pipe or a log gets the warnings and the table, not the steps.
  if (::isatty(STDERR_FILENO) == 1) {
    options.progress = [](const std::string& s, bool done) {
      std::cerr << s << (done ? '\n' : ' ') << std::flush;
    };
  }
  Calibration cal = run_calibration(options);
  // Which library was timed is a fact for the log too, not progress.
  if (!options.progress) std::cerr << fmt::format("BLAS: {}\n", cal.blas);
  if (!cal.doubts.empty()) {
    std::string doubts;
    for (const std::string& d : cal.doubts) doubts += (doubts.empty() ? "" : "; ") + d;
    std::string load =
        cal.load ? fmt::format(" (load {:.1f} on {} CPUs)", *cal.load, cal.all_threads) : "";
    if (!command.force)
      throw Error(
          fmt::format("figures not believable after {} measurements{}: {}; nothing "
                      "written: measure on a quiet machine, or --force to keep them "
                      "marked '{}'",
                      kAttempts, load, doubts, kSourceForced));
    std::cerr << fmt::format(
        "sonde calibrate: warning: figures not believable{}: {}; kept "
        "with source '{}' (--force)\n",
        load, doubts, kSourceForced);
  }
  std::vector<Peak> kept;
  std::vector<Peak> merged = merge_peaks(existing.peaks, cal.peaks, &kept);
  write_peaks_file(
      path, format_peaks(merged, fmt::format("`sonde calibrate{}` on {}",
                                             command.quick ? " --quick" : "", host_and_date())));
  for (const std::string& w : cal.warnings) std::cerr << "sonde calibrate: warning: " << w << '\n';
  for (const Peak& m : kept) {
    auto measured = std::find_if(cal.peaks.begin(), cal.peaks.end(), [&](const Peak& p) {
      return p.resource == m.resource && p.threads == m.threads;
    });
    std::cerr << fmt::format("sonde calibrate: note: {} {}: kept the manual {} {} (measured {})\n",
                             m.resource, threads_label(m.threads, true), m.value,
                             peak_unit(m.resource), measured->value);
  }
  print(merged, fmt::format("peaks written to {}", path));
  return 0;
}

}  // namespace sonde::analyzers
