// What the einsum rule knows: numpy.einsum's calls that ran the contraction in numpy's own C loop
// (c_einsum: optimize=False, the default), not as BLAS products. A red team's attention
// ('bld,bmd->blm') and matrix chain ('ij,jk,kl->il') spent 97 % of their run there, 3.29 s, and
// no rule fired; optimize=True made them two GEMMs, 0.12 s.
#pragma once

#include <cstdint>
#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct EinsumCalls {
  // The einsum frames with no einsum_path or tensordot beneath them (optimize=True calls
  // both): their own time (with --builtins, their c_einsum call's), every thread.
  std::int64_t ns = 0;
  std::int64_t calls = 0;
  std::string caller;  // the routine that called them the longest
};

EinsumCalls load_einsum_calls(const ProfileFile& file);

}  // namespace sonde::analyzers
