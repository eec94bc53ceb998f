// Where CUDA graph nodes come from. A graph's kernels, copies and memsets run under the
// replaying call (cudaGraphLaunch) and carry the id of the graph node that ran them
// (graphNodeId); CUPTI's graph resource callbacks say, on the creating thread and inside the
// creating call, when each node is made: captured from a launch during a stream capture, or
// added with cudaGraphAdd*Node. sonde keeps the call path current then, by node id; an
// instantiated (executable) graph's nodes are clones, whose id takes its original's origin.
#include <fmt/format.h>

#include "core/thread_local_state.hpp"
#include "gpu/cupti_backend.hpp"

namespace sonde {

namespace {
// Live graph nodes whose origin is kept: each entry is about 80 bytes with the map's own
// (5 MB in all); torch.compile's CUDA graphs hold thousands of nodes, not tens of thousands.
constexpr size_t kMaxGraphNodes = size_t(1) << 16;
}  // namespace

uint64_t CuptiBackend::graph_node_id(CUgraphNode node) const {
  uint64_t id = 0;
  if (node == nullptr || lib_.cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS) return 0;
  return id;
}

void CuptiBackend::on_graph(CUpti_CallbackId cbid, const CUpti_GraphData* data) {
  if (forked_.load(std::memory_order_relaxed) || t_internal || lib_.cuptiGetGraphNodeId == nullptr)
    return;
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED: {
      // Nodes an instantiate or clone makes are copies: CLONED gives their origin, whichever
      // of the two callbacks comes first (without it, a copy of an unknown node would take the
      // instantiate's path).
      NodeOrigin o;
      if (cloning_now() || !current_origin(o)) return;
      uint64_t id = graph_node_id(data->node);
      if (id == 0) return;
      if (data->graph != nullptr) lib_.cuptiGetGraphId(data->graph, &o.graph);
      std::lock_guard lock(origins_mu_);
      if (graph_nodes_.size() >= kMaxGraphNodes && !graph_nodes_.contains(id)) {
        graph_nodes_full_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      // A node id is never reused: one already kept is a copy whose CLONED came first (a child
      // graph's nodes copied into its parent), and keeps its original's origin.
      graph_nodes_.try_emplace(id, o);
      return;
    }
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: {
      uint64_t id = graph_node_id(data->node), original = graph_node_id(data->originalNode);
      if (id == 0 || original == 0) return;
      uint32_t graph = 0;
      if (data->graph != nullptr) lib_.cuptiGetGraphId(data->graph, &graph);
      std::lock_guard lock(origins_mu_);
      auto from = graph_nodes_.find(original);
      if (from == graph_nodes_.end()) return;  // made before sonde saw it, or not kept
      if (graph_nodes_.size() >= kMaxGraphNodes && !graph_nodes_.contains(id)) {
        graph_nodes_full_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      NodeOrigin o = from->second;
      o.graph = graph;
      o.gone = 0;
      graph_nodes_[id] = o;
      return;
    }
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING: {
      uint64_t id = graph_node_id(data->node);
      std::lock_guard lock(origins_mu_);
      if (auto it = graph_nodes_.find(id); it != graph_nodes_.end() && it->second.gone == 0)
        it->second.gone = generation_ + 1;
      return;
    }
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING: {
      uint32_t graph = 0;
      if (data->graph == nullptr || lib_.cuptiGetGraphId(data->graph, &graph) != CUPTI_SUCCESS)
        return;
      std::lock_guard lock(origins_mu_);
      graph_gone(graph);
      return;
    }
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: {
      uint32_t exec = 0;
      if (data->graphExec == nullptr ||
          lib_.cuptiGetGraphExecId(data->graphExec, &exec) != CUPTI_SUCCESS)
        return;
      std::lock_guard lock(origins_mu_);
      graph_gone(exec);
      return;
    }
    default:
      return;
  }
}

void CuptiBackend::graph_gone(uint32_t graph) {
  // Its nodes' records may still be in CUPTI's buffers (a graph launched, then destroyed
  // before the next flush): the entries stay for the origin lifetime (collect()).
  if (graph == 0) return;
  for (auto& [id, o] : graph_nodes_)
    if (o.graph == graph && o.gone == 0) o.gone = generation_ + 1;
}

void CuptiBackend::attach_graph_origin(GpuRow& row, uint64_t graph_node) {
  if (graph_node == 0) return;
  graph_records_.fetch_add(1, std::memory_order_relaxed);
  auto it = graph_nodes_.find(graph_node);
  if (it == graph_nodes_.end()) {
    graph_unknown_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  row.origin_thread = it->second.thread;
  row.origin_node = it->second.node;
  row.origin_node_id = it->second.node_id;
}

}  // namespace sonde
