// Shared fixtures of the model's unit tests (model_test.cpp, model_hier_measured_test.cpp).
#pragma once

#include <limits>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"

namespace hier::model_testing {

// A level without a ladder or measured steps: latency + bytes x per-flow ns per byte.
inline model::LevelParams line_level(double latency_ns, double ns_per_byte,
                                     std::vector<model::FlowPoint> concurrent = {}) {
  model::LevelParams p;
  p.latency_ns = latency_ns;
  p.ns_per_byte = ns_per_byte;
  p.concurrent = std::move(concurrent);
  return p;
}

// Round numbers: inside a node 1 µs + 1 ns/B whatever the flows; across nodes 10 µs + 10 ns/B
// for one flow, 20 ns/B each for two at once; reductions 0.5 ns/B; nothing else costs; the MPI's
// allreduce a ring; no margin.
inline model::Model simple() {
  model::Model m;
  m.intra = line_level(1000, 1.0);
  m.inter = line_level(10000, 10.0, {{1, 10.0}, {2, 20.0}});
  m.reduce_ns_per_byte = 0.5;
  m.copy_ns_per_byte = 0;
  m.step_overhead_ns = 0;
  m.overlap = 1.0;
  m.margin = 0;
  m.flat_algorithms[static_cast<size_t>(config::Coll::Allreduce)] = {
      {std::numeric_limits<int64_t>::max(), model::Algo::Ring}};
  return m;
}

// The planner's configuration with the node steps as messages (HIER_SHM=off): the figures these
// tests work out by hand are the message steps'. The segment's costs, and what HIER_SHM=auto (the
// default) plans, are model_shm_test.cpp's.
inline config::Config messages() {
  config::Config c;
  c.shm = config::ShmMode::Off;
  return c;
}

}  // namespace hier::model_testing
