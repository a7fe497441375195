// Runs one rank's schedule to completion with PMPI calls on the level communicators.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "exec/scratch.hpp"
#include "exec/typed.hpp"
#include "sched/ir.hpp"
#include "topo/levels.hpp"

namespace hier::exec {

// How byte schedules reach the user's blocks (allgather(v), alltoall): the collective's entry
// point knows the user's datatypes, counts and displacements.
class Blocks {
 public:
  virtual ~Blocks() = default;
  virtual int load(int block, char* dst, int64_t bytes) = 0;         // user's send block -> bytes
  virtual int store(int block, const char* src, int64_t bytes) = 0;  // bytes -> user's receive block
};

struct Binding {
  const char* send = nullptr;  // unit 0 of each buffer (element schedules: the element's address)
  char* recv = nullptr;
  char* scratch = nullptr;
  MPI_Aint stride = 1;         // bytes per unit: the datatype's extent, or 1 for byte schedules
  MPI_Datatype type = MPI_BYTE;
  MPI_Op op = MPI_OP_NULL;
  const TypeInfo* info = nullptr;          // element schedules: for local typed copies
  Blocks* blocks = nullptr;
  ScratchSet* tmp = nullptr;  // for steps libhier runs itself (exec/direct.hpp); null: never
};

// Which level steps libhier runs itself (exec/direct.hpp) instead of the MPI's collective, for
// `total` units (elements of *info, or bytes when info is null), from `from` bytes on (the
// plan's choice, carried by the schedule: Schedule::direct_rs_from / padded_agv_from); has_tmp:
// the run has buffers for them. Inputs equal on every member, so every member chooses alike.
bool use_direct_rs(int64_t from, const TypeInfo* info, bool has_tmp, int64_t total);
bool use_padded_agv(int64_t from, const TypeInfo* info, bool has_tmp, int64_t total);

// Reserves in `tmp` what run() will take from it for `s` (null: run() gets no tmp), so that a
// run never allocates once the ranks depend on each other. `info`: the element type (element
// schedules), null for byte schedules. False when memory could not be had.
bool reserve(const sched::Schedule& s, const topo::Levels& lv, const TypeInfo* info, ScratchSet* tmp);

// Steps with wave -1 run one at a time with blocking PMPI calls; consecutive steps of one wave
// (pipelined schedules, sched/pipeline.hpp) are all started nonblocking, then completed in order.
// On an error, everything already started is still completed before the first error returns.
int run(const sched::Schedule& s, const topo::Levels& lv, const Binding& b);

}  // namespace hier::exec
