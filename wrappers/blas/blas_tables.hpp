// The BLAS wrapper tables of libsonde, one per naming of the same routines (blas_wrappers.cpp:
// the LP64 names, and the ILP64 and prefixed names of pip's wheels), so that what describes the
// BLAS in use (blas_tables.cpp: its library, threads, configuration) reads whichever the program
// called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "../intercept.hpp"  // RealSymbol
#include "blas_models.hpp"

namespace sonde::blas {

// Registers a table's real-symbol slots and their names; from load-time constructors only.
void add_table(RealSymbol* slots, const char* const* names, std::size_t count);

// The first resolved routine of the first table that has one: its real definition and name.
struct Resolved {
  const void* fn;
  const char* name;
};
std::optional<Resolved> first_resolved();

// Threads the BLAS behind the tables runs a call with (blas_tables.cpp); 0: unknown.
__attribute__((noinline)) uint16_t threads_now();

// Inlined into every wrapper, so that a routine without a shape (a level-1 call) pays nothing:
// out of line, the 64-byte CallCost went by value through the stack, and the two 8-byte stores
// read back as one 16-byte load stalled on store forwarding (issue 34: 3-7 ns a call).
__attribute__((always_inline)) inline CallCost with_threads(CallCost cost) {
  if (cost.shape.dtype != DType::kNone) cost.shape.threads = threads_now();
  return cost;
}

}  // namespace sonde::blas
