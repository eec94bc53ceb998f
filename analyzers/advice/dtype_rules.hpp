// The precision rules of `sonde candidates` (kRules in candidates.cpp lists them): GEMMs in
// float64 where float32 may do, and in float32 where the CPU has bfloat16 units; their gains
// from the calibrated peaks of both precisions.
#pragma once

#include <vector>

#include "advice/candidates.hpp"
#include "profile/call_tree.hpp"

namespace sonde::analyzers {

std::vector<Candidate> float64_gemms(const AdviceInput& input, const Rule& rule);
// GEMMs in float32 on a CPU with bfloat16 units (run_info cpu.bf16): torch.autocast's bfloat16.
std::vector<Candidate> float32_gemms_on_bf16(const AdviceInput& input, const Rule& rule);
// AdviceInput::gemm_under_torch_ns from the busy threads' trees.
std::map<std::int64_t, std::int64_t> torch_gemm_time(const std::vector<ThreadTree>& threads);

}  // namespace sonde::analyzers
