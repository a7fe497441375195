// Flat or hierarchical, and which algorithm: from the collective, its size, the op and the
// level shape. Every input is the same on every rank of the communicator (sizes in bytes of the
// whole call, the op's commutativity, the shape computed from one allgathered table), so every
// rank decides the same: a rank going hier while another goes flat would deadlock.
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "sched/build.hpp"
#include "topo/shape.hpp"

namespace hier::sched {

struct Query {
  config::Coll coll = config::Coll::Allreduce;
  int64_t bytes = 0;  // the message: allreduce/reduce/bcast vector; reduce_scatter/allgather(v)
                      // the whole vector; alltoall what one rank sends
};

struct Plan {
  Algorithm algo = Algorithm::Flat;
  const char* why = "";
};

// Cheap pre-check before any level communicator exists: false when even the best shape would
// be planned flat for this call (HIER_ALGO=flat, or auto below every threshold), so that
// communicators used only for tiny calls never pay for building levels.
bool worth_building(const Query& q, config::Algo forced);

// `forced`: HIER_ALGO for this collective (hier = hierarchical whenever it is possible).
Plan plan(const Query& q, const topo::Shape& s, config::Algo forced);

// Pipeline chunks (sched/pipeline.hpp) for a hierarchical call of `units` units, `bytes` in all:
// allreduce and bcast are cut into chunks of HIER_CHUNK bytes (auto: the tuning table's);
// every other collective, and any call of one chunk or less, runs in one piece (1).
int chunks_for(config::Coll c, int64_t units, int64_t bytes);

}  // namespace hier::sched
