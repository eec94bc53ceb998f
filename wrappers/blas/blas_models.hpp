// FLOP and byte models of the BLAS routines sonde intercepts (formulas in docs/cost-models.md).
// FLOPs are the conventional counts every GFLOP/s figure uses: a real multiply-add is 2, a
// complex one 8. Bytes are the compulsory traffic: each operand read once, outputs written once
// (and read first when beta != 0).
#pragma once

#include <algorithm>
#include <cstdint>

#include "sonde/probe.hpp"
#include "subnormals.hpp"

namespace sonde::blas {

// CBLAS enumerations (ABI values from the CBLAS standard).
enum : int { kRowMajor = 101, kColMajor = 102 };
enum : int { kNoTrans = 111, kTrans = 112, kConjTrans = 113 };

constexpr int64_t element_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kC64:
      return 8;
    case DType::kC128:
      return 16;
    default:
      return 0;
  }
}
constexpr bool is_complex(DType t) { return t == DType::kC64 || t == DType::kC128; }
// FLOPs of one multiply-add.
constexpr uint64_t fma_flops(DType t) { return is_complex(t) ? 8 : 2; }

inline char trans_char(int cblas_trans) {
  return cblas_trans == kTrans ? 'T' : cblas_trans == kConjTrans ? 'C' : 'N';
}
inline char trans_char(const char* fortran_trans) {
  char c = fortran_trans ? *fortran_trans : 'N';
  return c == 't' || c == 'T' ? 'T' : c == 'c' || c == 'C' ? 'C' : 'N';
}
inline int64_t val(int64_t v) { return v < 0 ? 0 : v; }
inline int64_t val(const int* p) { return p && *p > 0 ? *p : 0; }
inline int64_t val(const int64_t* p) { return p && *p > 0 ? *p : 0; }  // ILP64's blasint

template <class S>
bool nonzero(S s) {
  return s != S(0);
}
inline bool nonzero_complex(const void* p, DType t) {
  if (p == nullptr) return true;
  if (t == DType::kC64) {
    auto* f = static_cast<const float*>(p);
    return f[0] != 0 || f[1] != 0;
  }
  auto* d = static_cast<const double*>(p);
  return d[0] != 0 || d[1] != 0;
}

inline CallCost gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, DType t, bool c_read) {
  m = val(m), n = val(n), k = val(k);
  CallCost c;
  c.flops = fma_flops(t) * uint64_t(m) * uint64_t(n) * uint64_t(k);
  c.bytes = uint64_t(element_size(t) * (m * k + k * n + m * n * (c_read ? 2 : 1)));
  c.shape = GemmShape{m, n, k, 1, ta, tb, t};
  return c;
}

// A real GEMM whose operands are sampled for subnormal values on some calls (subnormals.hpp).
template <class T>
CallCost sampled_gemm(bool row_major, char ta, char tb, int64_t m, int64_t n, int64_t k,
                      const void* a, int64_t lda, const void* b, int64_t ldb, DType t,
                      bool c_read) {
  sample_gemm_operands<T>(row_major, ta, tb, m, n, k, a, lda, b, ldb);
  return gemm(ta, tb, m, n, k, t, c_read);
}

// C (n x n, one triangle) = A A^T: n(n+1)/2 outputs, k multiply-adds each.
inline CallCost syrk(char trans, int64_t n, int64_t k, DType t, bool c_read) {
  n = val(n), k = val(k);
  CallCost c;
  c.flops = fma_flops(t) * uint64_t(n) * uint64_t(n + 1) / 2 * uint64_t(k);
  c.bytes = uint64_t(element_size(t) * (n * k + n * (n + 1) / 2 * (c_read ? 2 : 1)));
  c.shape = GemmShape{n, n, k, 1, trans, trans == 'N' ? 'T' : 'N', t};
  return c;
}

// y = A x (A is m x n; transposed, x has m elements and y has n).
inline CallCost gemv(char trans, int64_t m, int64_t n, DType t, bool y_read) {
  m = val(m), n = val(n);
  int64_t xs = trans == 'N' ? n : m, ys = trans == 'N' ? m : n;
  CallCost c;
  c.flops = fma_flops(t) * uint64_t(m) * uint64_t(n);
  c.bytes = uint64_t(element_size(t) * (m * n + xs + ys * (y_read ? 2 : 1)));
  return c;
}

inline CallCost ger(int64_t m, int64_t n, DType t) {
  m = val(m), n = val(n);
  CallCost c;
  c.flops = fma_flops(t) * uint64_t(m) * uint64_t(n);
  c.bytes = uint64_t(element_size(t) * (2 * m * n + m + n));
  return c;
}

// Level 1: `flops_per_element` and `vectors` touched (read + written).
inline CallCost vector_op(int64_t n, DType t, uint64_t flops_per_element, int64_t vectors) {
  n = val(n);
  CallCost c;
  c.flops = flops_per_element * uint64_t(n);
  c.bytes = uint64_t(element_size(t) * vectors * n);
  return c;
}
inline CallCost dot(int64_t n, DType t) { return vector_op(n, t, fma_flops(t), 2); }
inline CallCost axpy(int64_t n, DType t) { return vector_op(n, t, fma_flops(t), 3); }
// x *= alpha: a real alpha scales each component (1 FLOP each), a complex one multiplies (6).
inline CallCost scal(int64_t n, DType t, bool complex_alpha) {
  uint64_t per = !is_complex(t) ? 1 : complex_alpha ? 6 : 2;
  return vector_op(n, t, per, 2);
}

// ---- LAPACK ----
// The operation counts of LAPACK Working Note 41 (multiplications and additions, leading
// terms), complex ones four times the real (a complex multiply-add is 8 real FLOPs against 2);
// bytes each matrix read and written once. A workspace query (lwork or liwork -1: the routine
// only says how much it needs) is no call: blas_routines.def's SONDE_LAPACK entries skip it.
inline bool workspace_query(const int* lwork) { return lwork && *lwork == -1; }
inline bool workspace_query(const int64_t* lwork) { return lwork && *lwork == -1; }

inline CallCost lapack(double real_flops, DType t, int64_t elements) {
  CallCost c;
  c.flops = uint64_t(real_flops * double(fma_flops(t) / 2));
  c.bytes = uint64_t(element_size(t) * elements);
  return c;
}
// LU of an m x n matrix: mn^2 - n^3/3 (m >= n), 2n^3/3 square.
inline CallCost getrf(int64_t m, int64_t n, DType t) {
  double a = double(val(std::max(m, n))), b = double(val(std::min(m, n)));
  return lapack(a * b * b - b * b * b / 3, t, 2 * val(m) * val(n));
}
// Solves with an LU or Cholesky factor: two triangular solves per right-hand side, 2n^2 each.
inline CallCost triangular_solves(int64_t n, int64_t nrhs, DType t) {
  double nn = double(val(n));
  return lapack(2 * nn * nn * double(val(nrhs)), t, val(n) * val(n) + 2 * val(n) * val(nrhs));
}
inline CallCost gesv(int64_t n, int64_t nrhs, DType t) {
  CallCost f = getrf(n, n, t), s = triangular_solves(n, nrhs, t);
  f.flops += s.flops;
  f.bytes += 2 * uint64_t(element_size(t) * val(n) * val(nrhs));
  return f;
}
// Cholesky: n^3/3.
inline CallCost potrf(int64_t n, DType t) {
  double nn = double(val(n));
  return lapack(nn * nn * nn / 3, t, 2 * val(n) * val(n));
}
// The inverse from an LU factor: 4n^3/3.
inline CallCost getri(int64_t n, DType t) {
  double nn = double(val(n));
  return lapack(4 * nn * nn * nn / 3, t, 2 * val(n) * val(n));
}
// Householder QR of an m x n matrix: 2mn^2 - 2n^3/3 (m >= n).
inline CallCost geqrf(int64_t m, int64_t n, DType t) {
  double a = double(val(std::max(m, n))), b = double(val(std::min(m, n)));
  return lapack(2 * a * b * b - 2 * b * b * b / 3, t, 2 * val(m) * val(n));
}
// Q of a QR factorization, m x n from k reflectors: 4mnk - 2(m+n)k^2 + 4k^3/3.
inline CallCost orgqr(int64_t m, int64_t n, int64_t k, DType t) {
  double mm = double(val(m)), nn = double(val(n)), kk = double(val(k));
  // An invalid call (k > n > m: LAPACK refuses it) counts nothing, not a negative count.
  return lapack(std::max(0.0, 4 * mm * nn * kk - 2 * (mm + nn) * kk * kk + 4 * kk * kk * kk / 3), t,
                2 * val(m) * val(n));
}
// The eigenvalue and singular value drivers iterate to convergence: their counts depend on
// the matrix, so they are timed with no FLOPs.
inline CallCost timed_only() { return {}; }

}  // namespace sonde::blas
