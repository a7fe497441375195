// Whether a non-contiguous send or receive is faster packed by libhier (pack -> contiguous
// bytes -> unpack) than left to the MPI's own datatype handling. Cost model: dtype/tune.hpp.
#pragma once

#include <cstdint>

#include "dtype/canon.hpp"

namespace hier::dtype {

struct TuneModel;
struct Size {
  double bytes, blocks;  // packed bytes, contiguous runs
};
// The point-to-point rule under model m (policy aside): does packing a message of this size pay?
bool p2p_pays(const TuneModel& m, const Size& s);

// Point-to-point: packing + contiguous message + unpacking vs the MPI's derived-type message.
// Both sides use the same model, so for equal layouts they decide alike (either way the bytes
// on the wire are the same, so a mixed decision is still correct).
bool plan_pack_send(const Canon& c, int64_t count);
bool plan_pack_recv(const Canon& c, int64_t count);
// MPI_Pack / MPI_Unpack: the engine vs PMPI_Pack / PMPI_Unpack.
bool plan_engine_pack(const Canon& c, int64_t count);
bool plan_engine_unpack(const Canon& c, int64_t count);

}  // namespace hier::dtype
