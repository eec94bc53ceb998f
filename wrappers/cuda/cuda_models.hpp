// Cost models of the CUDA runtime and driver calls sonde intercepts (formulas in docs/gpu.md).
// A copy or a memset moves its byte count; launches, allocations and synchronisations carry no
// cost of their own (their kernels' time is CUPTI's to measure). Pure functions of integers, so
// they are unit-tested without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::cuda {

// Directions of a runtime copy, in cudaMemcpyKind's order (checked where the header is seen).
enum class CopyDir : uint8_t { kHtoH, kHtoD, kDtoH, kDtoD, kDefault, kCount };
constexpr size_t kCopyDirs = size_t(CopyDir::kCount);

// What the routine name of a copy ends with: "cudaMemcpy HtoD".
constexpr const char* kCopyDirNames[kCopyDirs] = {"HtoH", "HtoD", "DtoH", "DtoD", "Default"};

// Each direction's routines.role: 'copy' is a transfer between host and device (what `sonde
// candidates` weighs as host<->device copies); the others move data on one side ('other').
constexpr const char* kCopyDirRoles[kCopyDirs] = {"other", "copy", "copy", "other", "other"};

// A kind outside the enumeration is an error the runtime reports; it is counted as Default.
constexpr CopyDir copy_dir(int kind) {
  return kind >= 0 && kind < int(CopyDir::kDefault) ? CopyDir(kind) : CopyDir::kDefault;
}

constexpr CallCost moved(uint64_t bytes) {
  CallCost c;
  c.bytes = bytes;
  return c;
}

// A pitched copy moves `height` rows of `width` bytes; the pitch padding is not touched.
constexpr CallCost moved_2d(uint64_t width, uint64_t height) { return moved(width * height); }

constexpr CallCost no_cost() { return CallCost{}; }

}  // namespace sonde::cuda
