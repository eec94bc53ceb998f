// The torch-operator rule of `sonde candidates` (kRules in candidates.cpp lists it): one ATen
// operator whose own time, outside any BLAS or oneDNN call beneath it, is a large share of the
// run. The GEMM, convolution and update rules name what they know; an element-wise, reduction
// or random operator was named by none (a red-team Transformer spent 39 % of its run in
// aten::dropout, and no rule fired).
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> torch_operator(const AdviceInput& input, const Rule& rule);

// The small-operators rule: a training loop whose iterations are mostly the cost of calling
// its operators, not their arithmetic (a batch of 4 through a small MLP: 2,048 iterations of
// 89 operators a few microseconds each, the FLOPs 5 % of the time; the same samples in batches
// of 64 ran 7.7 times faster), which no rule named: every operator alone was small.
std::vector<Candidate> small_operators(const AdviceInput& input, const Rule& rule);

// The embedding-dense-grad rule: an nn.Embedding (or EmbeddingBag) of dense gradients whose
// backward builds a gradient of the whole table at every step, many times the rows its forward
// looks up, and whose optimizer then updates every row (a red-team 400,000 x 64 table: the
// backward 65 ms a step against a 0.5 ms lookup; sparse=True with SparseAdam ran the loop in
// 0.24 s instead of 4.4 s, and the advice named Adam's foreach).
std::vector<Candidate> embedding_dense_grad(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
