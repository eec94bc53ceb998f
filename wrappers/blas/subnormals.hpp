// Evidence of subnormal (denormal) operands: the BLAS wrappers look at a sample of the
// elements of a few GEMM calls (the first of each thread, then one in 64), so that advice about
// flush-to-zero rests on values actually seen, not on the FTZ flag alone. Operands of normal
// magnitude can still multiply to subnormals (weights decayed to 1e-30 against inputs of 1e-10,
// their products near 1e-40): a call whose largest sampled elements of A and B multiply under
// the smallest normal number is counted too (a red-team layer ran 2.8 times slower so, its
// operands clean, and no candidate named FTZ).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace sonde::blas {

struct SubnormalStats {
  uint64_t sampled_calls, flagged_calls, sampled_values, subnormal_values;
  uint64_t product_calls;  // sampled calls whose operands' products are subnormal
};

// Counts one sampled call (`subnormals` of `values` elements were subnormal; `products`: its
// operands multiply to subnormals).
void record_subnormal_sample(uint64_t values, uint64_t subnormals, bool products = false);
SubnormalStats subnormal_stats();

// Whether this call is one to sample: a per-thread countdown, no shared state.
inline bool sample_this_call() {
  // initial-exec, like sonde's other thread-local state: one fs-relative access, no call.
  static thread_local uint32_t countdown __attribute__((tls_model("initial-exec"))) = 0;
  if (countdown != 0) {
    --countdown;
    return false;
  }
  countdown = 63;
  return true;
}

// Up to 64 elements of a rows x cols matrix stored with leading dimension ld, rows
// contiguous when `row_major`, spread over the whole matrix.
// `largest`: the largest magnitude among them.
template <class T>
uint64_t count_subnormals(const T* m, int64_t rows, int64_t cols, int64_t ld, bool row_major,
                          uint64_t& seen, T& largest) {
  largest = 0;
  if (m == nullptr || rows <= 0 || cols <= 0) return 0;
  uint64_t found = 0;
  for (int64_t s = 0; s < 64; ++s) {
    int64_t r = s * rows / 64, c = (s * 37) % cols;
    T v = row_major ? m[r * ld + c] : m[c * ld + r];
    found += std::fpclassify(v) == FP_SUBNORMAL;
    T a = std::fabs(v);
    if (a > largest) largest = a;  // NaN compares false: left out
    ++seen;
  }
  return found;
}

// op(A) is M x K, op(B) is K x N; `row_major` is the storage order (CBLAS layout, Fortran: false).
template <class T>
void sample_gemm_operands(bool row_major, char ta, char tb, int64_t m, int64_t n, int64_t k,
                          const void* a, int64_t lda, const void* b, int64_t ldb) {
  if (!sample_this_call()) return;
  uint64_t seen = 0;
  T largest_a = 0, largest_b = 0;
  uint64_t found = count_subnormals(static_cast<const T*>(a), ta == 'N' ? m : k, ta == 'N' ? k : m,
                                    lda, row_major, seen, largest_a);
  found += count_subnormals(static_cast<const T*>(b), tb == 'N' ? k : n, tb == 'N' ? n : k, ldb,
                            row_major, seen, largest_b);
  // Zeros multiply to exact zeros, no assist: both sides need a nonzero element. A call whose
  // operands are subnormal already is counted as such.
  bool products = found == 0 && largest_a > 0 && largest_b > 0 &&
                  largest_a * largest_b < std::numeric_limits<T>::min();
  record_subnormal_sample(seen, found, products);
}

}  // namespace sonde::blas
