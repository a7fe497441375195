// The layouts the pack benchmarks time, in one table: bench/pack/bench_pack (host: libhier's
// engine against the MPI's own MPI_Pack and a hand-written loop) and bench/device/bench_device
// (the GPU module's kernels against a device-to-device copy of the same bytes) walk the same
// list, so a layout added here is timed by both. Groups: vectors of 4 B .. 512 B blocks, faces
// of a 256^3 grid, irregular indexed blocks, an indexed_block atom gather, resized structs
// (24 B, 8 B, and issue 25's 16 B one in one contiguous type), and DDTBench's MILC, NAS LU,
// FFT2 and WRF patterns.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace hier::bench {

struct PackLayout {
  std::string name;
  MPI_Datatype type;  // not committed; the callee commits it and frees it
  int count;          // elements per call
  char* base;         // element 0's origin, in host memory holding the layout's data
  // The floor: a copy loop written by hand for exactly this layout.
  std::function<void(char* packed)> floor_pack;
  std::function<void(const char* packed)> floor_unpack;
};

// Builds every layout in turn and hands it to `fn`; a layout's host data lives until `fn`
// returns for the last layout of its group.
void for_each_pack_layout(const std::function<void(const PackLayout&)>& fn);

}  // namespace hier::bench
