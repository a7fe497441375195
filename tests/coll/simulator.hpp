// Runs the schedules of all ranks of a shape together, without MPI: level communicators are
// derived from the shape exactly as topo::build_levels derives them, collectives match when every
// member has reached one on the same communicator, data are int64 values and every reduction is
// a sum. It fails (returns a message) on a mismatch between members (kind, root, counts), an
// out-of-bounds range, aliasing of source and destination, or a deadlock. Pipelined schedules
// (Step::wave) run in their listed order, which is one valid order of a wave's nonblocking
// steps; the simulator also fails when steps of one wave touch the same data (one writing),
// and when a blocking step meets a nonblocking one.
// Quantized schedules (Schedule::quant_bits, sched/build_quant.cpp): the values are float64,
// each held as its bit pattern in an int64 (std::bit_cast), summed as float64; the Records
// buffer holds one byte per int64; Quantize / Dequantize / DequantizeReduce run the host
// kernels of src/quant (float64), so a walked schedule gives the very values a rank computes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/ir.hpp"
#include "topo/shape.hpp"

namespace coll_test {

struct RankData {
  std::vector<int64_t> send, recv;
  // Byte schedules: the user's blocks (allgather: recv blocks by source; alltoall: send blocks by
  // destination and recv blocks by source), each `block` units long.
  std::vector<std::vector<int64_t>> send_blocks, recv_blocks;
};

// Members (ranks of the user communicator, in communicator rank order) of the level
// communicator `c` that `rank` belongs to; empty when it is not a member.
std::vector<int> members(const hier::topo::Shape& s, int rank, const hier::sched::CommRef& c);

// Returns "" on success, else what went wrong.
std::string simulate(const hier::topo::Shape& s, const std::vector<hier::sched::Schedule>& scheds,
                     std::vector<RankData>& data);

}  // namespace coll_test
