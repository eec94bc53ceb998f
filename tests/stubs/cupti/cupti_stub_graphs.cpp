// CUDA graphs in the stub libcupti: the ids CUPTI gives graphs and their nodes, the graph
// resource callbacks, and the records of a graph's kernels, which carry the id of the node
// that ran them (graphNodeId).
//
// As CUPTI documents and NVIDIA's cuda_graphs_trace sample reads it: a resource callback's
// CUpti_ResourceData.resourceDescriptor is a CUpti_GraphData; GRAPHNODE_CREATED comes on the
// creating thread, inside the API call that creates the node (a launch captured during a
// stream capture, cudaGraphAdd*Node); instantiating a graph makes a copy of each node
// (GRAPHNODE_CLONED: node the copy, originalNode the node copied; CREATED comes for the copy
// too) and the kernels an executable graph runs carry the copy's id. What the stub assumes
// beyond that is listed in docs/gpu.md ("What the stubs still assume").
//
// Handles: a CUgraph, CUgraphExec or CUgraphNode the stub hands out is the address of its
// GraphObject; graphs and executable graphs draw their ids from one counter (the id of a
// copy's graph is its executable graph's, as Triton's Proton reads them).
#include "cupti_stub.hpp"
#include "cupti_stub_control.h"

using namespace cupti_stub;

namespace {

struct GraphObject {
  uint64_t id;
};

std::atomic<uint64_t> g_next_node{1}, g_next_graph{1};

GraphObject* make(std::atomic<uint64_t>& counter) { return new GraphObject{counter++}; }

// The subscriber hears of it if it asked for resource callbacks.
void deliver(CUpti_CallbackIdResource cbid, CUpti_GraphData graph) {
  Stub& s = stub();
  if (s.callback == nullptr || !s.domains[CUPTI_CB_DOMAIN_RESOURCE]) return;
  CUpti_ResourceData data{};
  data.context = reinterpret_cast<CUcontext>(kDefaultContext);
  data.resourceDescriptor = &graph;
  s.callback(s.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
}

CUgraph as_graph(uintptr_t h) { return reinterpret_cast<CUgraph>(h); }
CUgraphNode as_node(uintptr_t h) { return reinterpret_cast<CUgraphNode>(h); }

}  // namespace

STUB_EXPORT CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t* id) {
  if (node == nullptr || id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = reinterpret_cast<const GraphObject*>(node)->id;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiGetGraphId(CUgraph graph, uint32_t* id) {
  if (graph == nullptr || id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = uint32_t(reinterpret_cast<const GraphObject*>(graph)->id);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiGetGraphExecId(CUgraphExec exec, uint32_t* id) {
  if (exec == nullptr || id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = uint32_t(reinterpret_cast<const GraphObject*>(exec)->id);
  return CUPTI_SUCCESS;
}

// ---- what the test program (or the stub runtime) calls ----

STUB_EXPORT uintptr_t cupti_stub_graph_create(void) {
  GraphObject* g = make(g_next_graph);
  CUpti_GraphData d{};
  d.graph = as_graph(uintptr_t(g));
  deliver(CUPTI_CBID_RESOURCE_GRAPH_CREATED, d);
  return uintptr_t(g);
}

STUB_EXPORT uintptr_t cupti_stub_graph_node_create(uintptr_t graph) {
  GraphObject* n = make(g_next_node);
  CUpti_GraphData d{};
  d.graph = as_graph(graph);
  d.node = as_node(uintptr_t(n));
  d.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
  deliver(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, d);
  return uintptr_t(n);
}

STUB_EXPORT uintptr_t cupti_stub_graph_instantiate(uintptr_t graph, const uintptr_t* nodes, int n,
                                                   uintptr_t* copies) {
  GraphObject* exec = make(g_next_graph);
  CUpti_GraphData d{};
  d.graph = as_graph(graph);
  d.graphExec = reinterpret_cast<CUgraphExec>(exec);
  deliver(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING, d);
  for (int i = 0; i < n; ++i) {
    GraphObject* copy = make(g_next_node);
    copies[i] = uintptr_t(copy);
    CUpti_GraphData c{};
    c.graph = as_graph(uintptr_t(exec));
    c.originalGraph = as_graph(graph);
    c.node = as_node(copies[i]);
    c.originalNode = as_node(nodes[i]);
    c.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
    c.graphExec = d.graphExec;
    // CLONED first, then CREATED: a client that took the creating call's path at CREATED would
    // give the copy the instantiate's path (the order is the stub's; sonde needs neither).
    deliver(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, c);
    deliver(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, c);
  }
  deliver(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, d);
  return uintptr_t(exec);
}

// cudaGraphDestroy: each node is about to be destroyed, then the graph.
STUB_EXPORT void cupti_stub_graph_destroy(uintptr_t graph, const uintptr_t* nodes, int n) {
  for (int i = 0; i < n; ++i) {
    CUpti_GraphData d{};
    d.graph = as_graph(graph);
    d.node = as_node(nodes[i]);
    d.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
    deliver(CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING, d);
  }
  CUpti_GraphData d{};
  d.graph = as_graph(graph);
  deliver(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, d);
}

// cudaGraphExecDestroy: only the executable graph is said to go (not each of its nodes).
STUB_EXPORT void cupti_stub_graph_exec_destroy(uintptr_t exec) {
  CUpti_GraphData d{};
  d.graphExec = reinterpret_cast<CUgraphExec>(exec);
  deliver(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, d);
}

// A kernel node of executable graph `exec` ran: its record carries the launch's correlation id,
// the node's id (graphNodeId) and the graph's (graphId).
STUB_EXPORT void cupti_stub_graph_kernel(uint32_t correlation, const char* name, uint64_t start,
                                         uint64_t end, int grid_x, int block_x, int registers,
                                         uintptr_t node, uintptr_t exec) {
  kernel_record(correlation, name, start, end, grid_x, block_x, registers,
                node ? reinterpret_cast<const GraphObject*>(node)->id : 0,
                exec ? uint32_t(reinterpret_cast<const GraphObject*>(exec)->id) : 0);
}
