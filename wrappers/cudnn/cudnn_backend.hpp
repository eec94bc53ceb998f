// FLOPs and bytes of cudnnBackendExecute, which runs an execution plan of cuDNN's graph API (what
// PyTorch's convolutions and matmuls go through): read back from the plan's operation graph with
// the backend attribute API, once per plan and thread.
#pragma once

#include <cudnn_graph.h>

#include "sonde/probe.hpp"

namespace sonde::cudnn {

CallCost backend_plan_cost(cudnnBackendDescriptor_t plan);

}  // namespace sonde::cudnn
