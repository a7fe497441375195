// Which level steps of a schedule run through shared memory (Step::via). Applied to a built
// schedule (exec/prepare.cpp, at the schedule-cache miss), the same on every rank: it depends on
// the schedule and on which level communicators have a segment, agreed when they were built.
// The planner applies the same routing to the schedules it costs (model::route_inside_nodes),
// so that it costs what runs.
#pragma once

#include <functional>

#include "sched/ir.hpp"
#include "topo/shape.hpp"

namespace hier::sched {

// The kinds the shared-memory transport runs (exec/shm_steps.hpp).
bool shm_runs(Kind k);

// Whether `c` lies inside one node of `s` (topo::Shape::inside_node): the only levels routed.
bool inside_node(const CommRef& c, const topo::Shape& s);

// Marks Via::Shm every step of those kinds on a communicator inside a node of `shape` for which
// `has_segment` holds (null: every such communicator, as the planner assumes). Returns how many
// it marked.
int route_shm(Schedule& s, const topo::Shape& shape, const std::function<bool(const CommRef&)>& has_segment = nullptr);

// The marking alone, on every communicator `pred` names (the simulator's tests route levels
// that never run so, to check that the attribute changes no result).
int mark_shm(Schedule& s, const std::function<bool(const CommRef&)>& pred);

}  // namespace hier::sched
