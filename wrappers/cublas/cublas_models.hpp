// FLOP and byte models of the cuBLAS and cuBLASLt GEMMs sonde intercepts (formulas in
// docs/gpu.md). Pure functions of the arguments and descriptor values, so they are unit-tested
// without libcublas.
//
// The same conventions as the CPU BLAS (blas_models.hpp): a real multiply-add is 2 FLOPs, a
// complex one 8; bytes are the compulsory traffic, each operand read once and the output written
// once, C read first when beta is not zero. Operands may have different element types here
// (GemmEx, cuBLASLt), so each is counted at its own size.
#pragma once

#include <cublas_api.h>
#include <library_types.h>

#include <cstdint>
#include <cstring>

#include "sonde/probe.hpp"

namespace sonde::cublas {

// What the models need of an element type. dtype kNone: FLOPs and bytes are kept, but no shape is
// recorded (no peak to compare with). bytes 0: a sub-byte type, whose traffic is not modelled.
struct TypeInfo {
  int64_t bytes = 0;
  bool complex = false;
  DType dtype = DType::kNone;
};

constexpr TypeInfo type_info(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F:
      return {2, false, DType::kF16};
    case CUDA_R_16BF:
      return {2, false, DType::kBF16};
    case CUDA_R_32F:
      return {4, false, DType::kF32};
    case CUDA_R_64F:
      return {8, false, DType::kF64};
    case CUDA_C_32F:
      return {8, true, DType::kC64};
    case CUDA_C_64F:
      return {16, true, DType::kC128};
    case CUDA_C_16F:
    case CUDA_C_16BF:
      return {4, true, DType::kNone};
    case CUDA_R_8I:
    case CUDA_R_8U:
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
    case CUDA_R_8F_UE8M0:
      return {1, false, DType::kNone};
    case CUDA_C_8I:
    case CUDA_C_8U:
    case CUDA_R_16I:
    case CUDA_R_16U:
      return {2, t == CUDA_C_8I || t == CUDA_C_8U, DType::kNone};
    case CUDA_C_16I:
    case CUDA_C_16U:
    case CUDA_R_32I:
    case CUDA_R_32U:
      return {4, t == CUDA_C_16I || t == CUDA_C_16U, DType::kNone};
    case CUDA_C_32I:
    case CUDA_C_32U:
    case CUDA_R_64I:
    case CUDA_R_64U:
      return {8, t == CUDA_C_32I || t == CUDA_C_32U, DType::kNone};
    case CUDA_C_64I:
    case CUDA_C_64U:
      return {16, true, DType::kNone};
    default:
      return {};
  }
}

constexpr char op_char(int op) { return op == CUBLAS_OP_T ? 'T' : op == CUBLAS_OP_C ? 'C' : 'N'; }

// Element types of A, B, C (read when beta != 0) and D (written; C itself outside cuBLASLt).
struct Operands {
  TypeInfo a, b, c, d;
};
constexpr Operands same_type(cudaDataType t) {
  TypeInfo i = type_info(t);
  return {i, i, i, i};
}
constexpr Operands ex_types(cudaDataType a, cudaDataType b, cudaDataType c) {
  return {type_info(a), type_info(b), type_info(c), type_info(c)};
}

constexpr int64_t val(int64_t v) { return v < 0 ? 0 : v; }

// D (m x n) = op(A) (m x k) op(B) (k x n) [+ C], `batch` times. A complex A makes it complex.
constexpr CallCost gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, int64_t batch,
                        const Operands& t, bool c_read) {
  m = val(m), n = val(n), k = val(k), batch = batch < 1 ? 1 : batch;
  CallCost c;
  c.flops = (t.a.complex ? 8 : 2) * uint64_t(m) * uint64_t(n) * uint64_t(k) * uint64_t(batch);
  c.bytes = uint64_t(batch) * uint64_t(t.a.bytes * m * k + t.b.bytes * k * n + t.d.bytes * m * n +
                                       (c_read ? t.c.bytes * m * n : 0));
  c.shape = GemmShape{m, n, k, batch, ta, tb, t.a.dtype};
  return c;
}

// A cuBLASLt matrix as its layout descriptor describes it.
struct Layout {
  TypeInfo type;
  int64_t rows = 0, cols = 0, batch = 1;
};

// cuBLASLt: D is m x n; k is the inner dimension of op(A); the batch is D's.
constexpr CallCost lt_matmul(char ta, char tb, const Layout& a, const Layout& b, const Layout& c,
                             const Layout& d, bool c_read) {
  int64_t k = ta == 'N' ? a.cols : a.rows;
  return gemm(ta, tb, d.rows, d.cols, k, d.batch, Operands{a.type, b.type, c.type, d.type}, c_read);
}

// The type alpha and beta point to: the compute precision (cuBLAS) or scale type (cuBLASLt),
// complex when the output is.
enum class Scalar : uint8_t { kF16, kF32, kF64, kI32 };

constexpr Scalar scalar_of(cublasComputeType_t t) {
  switch (t) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      return Scalar::kF16;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
      return Scalar::kF64;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
      return Scalar::kI32;
    default:
      return Scalar::kF32;
  }
}

constexpr Scalar scalar_of(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F:
    case CUDA_C_16F:
      return Scalar::kF16;
    case CUDA_R_64F:
    case CUDA_C_64F:
      return Scalar::kF64;
    case CUDA_R_32I:
    case CUDA_C_32I:
      return Scalar::kI32;
    default:
      return Scalar::kF32;
  }
}

// Whether the host scalar at `p` is not zero (both parts of a complex one). Without a pointer
// the model cannot tell, and counts C as read.
inline bool nonzero(const void* p, Scalar s, bool complex) {
  if (p == nullptr) return true;
  auto* bytes = static_cast<const unsigned char*>(p);
  for (int part = 0; part < (complex ? 2 : 1); ++part) {
    switch (s) {
      case Scalar::kF16: {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * part, 2);
        if ((h & 0x7fff) != 0) return true;  // +0 and -0 are the zeros
        break;
      }
      case Scalar::kF32: {
        float f;
        std::memcpy(&f, bytes + 4 * part, 4);
        if (f != 0) return true;
        break;
      }
      case Scalar::kF64: {
        double d;
        std::memcpy(&d, bytes + 8 * part, 8);
        if (d != 0) return true;
        break;
      }
      case Scalar::kI32: {
        int32_t i;
        std::memcpy(&i, bytes + 4 * part, 4);
        if (i != 0) return true;
        break;
      }
    }
  }
  return false;
}

constexpr int64_t scalar_bytes(Scalar s, bool complex) {
  int64_t b = s == Scalar::kF16 ? 2 : s == Scalar::kF64 ? 8 : 4;
  return complex ? 2 * b : b;
}

// cublasGemmGroupedBatchedEx: the sum over groups of group_size[g] GEMMs of group g's shape, C
// read where that group's beta (one scalar per group) is not zero or cannot be read. The shape
// is recorded only for one group: several groups have no one shape.
template <class I>
CallCost grouped(const cublasOperation_t* ta, const cublasOperation_t* tb, const I* m, const I* n,
                 const I* k, I groups, const I* group_size, const Operands& t, const void* betas,
                 bool host_scalars, Scalar s, bool complex) {
  CallCost total;
  if (ta == nullptr || tb == nullptr || m == nullptr || n == nullptr || k == nullptr ||
      group_size == nullptr) {
    return total;
  }
  for (I g = 0; g < groups; ++g) {
    if (group_size[g] <= 0) continue;
    const void* beta = host_scalars && betas != nullptr
                           ? static_cast<const char*>(betas) + g * scalar_bytes(s, complex)
                           : nullptr;
    CallCost c = gemm(op_char(ta[g]), op_char(tb[g]), m[g], n[g], k[g], group_size[g], t,
                      nonzero(beta, s, complex));
    total.flops += c.flops;
    total.bytes += c.bytes;
    if (groups == 1) total.shape = c.shape;
  }
  return total;
}

}  // namespace sonde::cublas
