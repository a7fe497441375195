// The performance model behind the datatype planner: linear costs of packing with the engine
// and with the MPI's own datatype engine, and of a message end to end with the derived type
// vs as contiguous bytes; measured by tools/hier-tune and read from HIER_TUNE_FILE (JSON), or
// built-in defaults measured on the 2-core reference VM for this MPI.
#pragma once

#include <string>

namespace hier::dtype {

// Time of moving `bytes` bytes in `blocks` contiguous runs: a + b * bytes + c * blocks.
struct CostLine {
  double overhead_ns = 0, ns_per_byte = 0, ns_per_block = 0;
  double at(double bytes, double blocks) const { return overhead_ns + ns_per_byte * bytes + ns_per_block * blocks; }
};

struct TuneModel {
  enum class Policy { Auto, Always, Never };
  Policy policy = Policy::Auto;  // always/never: tests and experiments
  // MPI_Pack / MPI_Unpack: libhier's host engine vs the MPI's own (PMPI_Pack / PMPI_Unpack).
  CostLine engine_pack, engine_unpack;
  CostLine mpi_pack, mpi_unpack;
  // Point-to-point, one message end to end (send to receive completion): the derived type
  // handled by the MPI on both sides, and contiguous bytes (what libhier sends once packed).
  CostLine mpi_p2p, contig_p2p;
  int64_t min_bytes = 0;  // below this, never pack ourselves (latency-bound messages)
  // Device buffers (issue 25): the GPU module's kernels and the copies between device and host
  // memory, which decide between packing a device buffer with the kernels, staging host copies
  // of its span (an MPI that is not GPU-aware) and the MPI's own handling of the device layout
  // (GPU-aware). hier-tune measures them where a GPU module and its runtime are loaded (the
  // "device" object of the datatype model, docs/tune-file.md); without, these built-ins: orders
  // of magnitude for a PCIe 4 GPU (no GPU timed them: ~10 us per kernel launch + sync or copy,
  // 25 GB/s copies, kernels near device memory speed, and a GPU-aware MPI moving a device layout
  // block by block, one copy each, as TEMPI measured).
  struct Device {
    CostLine kernel_pack{10000, 0.002, 0};    // device memory -> packed device memory
    CostLine kernel_unpack{10000, 0.002, 0};  // packed device memory -> device memory
    CostLine copy{10000, 0.04, 0};            // one device <-> host copy of `bytes`
    CostLine mpi_pack{10000, 0.04, 2000};     // a GPU-aware MPI packing a device layout
    bool measured = false;                    // from a tune file's "device" object
  } device;
  std::string source = "built-in";
};

// The process's model: HIER_TUNE_FILE if set and valid (else one warning), or the built-ins.
const TuneModel& tune_model();
TuneModel builtin_model();

// Applies the datatype object of a tune file (libhier-tune/2 "dtype", libhier-tune/1 "p2p"; the
// file itself is read by model/load.hpp, docs/tune-file.md) over `m`.
bool apply_tune_object(const std::string& object_json, TuneModel& m, std::string& err);
// The model as a libhier-tune/1 document (its "p2p" object is the datatype object hier-tune writes).
std::string tune_to_json(const TuneModel& m, const std::string& mpi_library, const std::string& host);

}  // namespace hier::dtype
