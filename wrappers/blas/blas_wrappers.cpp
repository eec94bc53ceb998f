// Expands blas_routines.def into the interposed BLAS functions, their routine ids and their
// real-symbol slots, once per naming of the routines, each function reported under its own name
// (the symbol the program called):
//
//   NAME           the plain LP64 names: Debian's and conda's BLAS, MKL's LP64 interface
//   NAME64_        numpy 1.22-1.26's bundled OpenBLAS (openblas64_: ILP64, suffix 64_)
//   scipy_NAME64_  numpy 2.x's scipy-openblas64 (prefix scipy_, suffix 64_; ILP64)
//   scipy_NAME     scipy's scipy-openblas32 (prefix scipy_; LP64)
//
// For a Fortran name the suffix follows its underscore (sgemm_ -> sgemm_64_), as OpenBLAS's
// SYMBOLSUFFIX does. ILP64's blasint is int64_t; the CBLAS enums stay int. Without these, a
// numpy from pip ran every product unseen: its BLAS defines none of the LP64 names.
#include <cstdint>

#include "../intercept.hpp"
#include "blas_models.hpp"
#include "blas_tables.hpp"
#include "sonde/routine_kinds.hpp"

using sonde::DType;
namespace blas = sonde::blas;

// Two levels: SONDE_VARIANT_NAME(NAME) is expanded into the one pasted token as an argument
// of the first, before the second stringifies it.
#define SONDE_VARIANT_ROW(VNAME, DTYPE) SONDE_VARIANT_ROW_NAMED(VNAME, DTYPE)
#define SONDE_VARIANT_ROW_NAMED(VNAME, DTYPE) \
  SONDE_TABLE_ROW(VNAME, {#VNAME, sonde::kinds::kBlas, "blas", "", 0, DType::DTYPE})
#define SONDE_VARIANT_INTERCEPT(VNAME, RET, PARAMS, ARGS, MODEL)                        \
  SONDE_INTERCEPT(g_real, g_ids, ::sonde::Nesting::kSuppress, VNAME, RET, PARAMS, ARGS, \
                  ::sonde::blas::with_threads(MODEL))
#define SONDE_VARIANT_INTERCEPT_UNLESS(VNAME, RET, PARAMS, ARGS, QUERY, MODEL)                 \
  SONDE_INTERCEPT_UNLESS(g_real, g_ids, ::sonde::Nesting::kSuppress, VNAME, RET, PARAMS, ARGS, \
                         QUERY, ::sonde::blas::with_threads(MODEL))

#define BI int
#define SONDE_VARIANT_NS blas_lp64
#define SONDE_VARIANT_NAME(N) N
#define SONDE_VARIANT_CONSTRUCTOR register_blas_lp64
#include "blas_variant.inc"
#undef SONDE_VARIANT_CONSTRUCTOR
#undef SONDE_VARIANT_NAME
#undef SONDE_VARIANT_NS
#undef BI

#define BI int64_t
#define SONDE_VARIANT_NS blas_ilp64_suffixed
#define SONDE_VARIANT_NAME(N) N##64_
#define SONDE_VARIANT_CONSTRUCTOR register_blas_ilp64_suffixed
#include "blas_variant.inc"
#undef SONDE_VARIANT_CONSTRUCTOR
#undef SONDE_VARIANT_NAME
#undef SONDE_VARIANT_NS

#define SONDE_VARIANT_NS blas_ilp64_scipy
#define SONDE_VARIANT_NAME(N) scipy_##N##64_
#define SONDE_VARIANT_CONSTRUCTOR register_blas_ilp64_scipy
#include "blas_variant.inc"
#undef SONDE_VARIANT_CONSTRUCTOR
#undef SONDE_VARIANT_NAME
#undef SONDE_VARIANT_NS
#undef BI

#define BI int
#define SONDE_VARIANT_NS blas_lp64_scipy
#define SONDE_VARIANT_NAME(N) scipy_##N
#define SONDE_VARIANT_CONSTRUCTOR register_blas_lp64_scipy
#include "blas_variant.inc"
#undef SONDE_VARIANT_CONSTRUCTOR
#undef SONDE_VARIANT_NAME
#undef SONDE_VARIANT_NS
#undef BI
