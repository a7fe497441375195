// Which level steps of a schedule run through shared memory (Step::via). Applied to a built
// schedule (exec/prepare.cpp, at the schedule-cache miss), the same on every rank: it depends on
// the schedule and on which level communicators have a segment, agreed when they were built.
#pragma once

#include <functional>

#include "sched/ir.hpp"

namespace hier::sched {

// The kinds the shared-memory transport runs (exec/shm_steps.hpp).
bool shm_runs(Kind k);

// Marks Via::Shm every step of those kinds on a communicator for which `has_segment` holds.
// Returns how many it marked.
int route_shm(Schedule& s, const std::function<bool(const CommRef&)>& has_segment);

}  // namespace hier::sched
