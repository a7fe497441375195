// The GPU module's rates (the tune file's "device" section, docs/tune-file.md): what a
// device-bound schedule's local steps (the module's kernels) and staged message steps (copies
// through pinned host memory) cost (model/cost_device.hpp). hier-tune measures them where a GPU
// module loads (tools/hier-tune/device.cpp); without a measurement the built-ins below.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace hier::model {

// Where a planned call's buffers live, as its communicator agreed (exec/context.hpp): host
// memory; device memory handed to a GPU-aware MPI (Context::device_hier); device memory whose
// message steps are staged through pinned host memory (device_hier with device_stage). Agreed
// by every rank, so every rank plans alike.
enum class Placement : uint8_t { Host, Device, Staged };
const char* to_string(Placement p);

// One quantization format's kernels on the device, per byte of float data (as QuantRates).
struct DeviceQuantRates {
  double quantize_ns_per_byte = 0, dequantize_ns_per_byte = 0, dequantize_add_ns_per_byte = 0;
};

struct DeviceRates {
  // One kernel or copy queued on the module's stream and waited for (launch + synchronize):
  // every local step of a device-bound schedule costs it once, every message step once (the
  // executor waits for the stream before it issues one), a staged one twice (its copies).
  double step_ns = 0;
  double copy_ns_per_byte = 0;      // device -> device
  double h2d_ns_per_byte = 0;       // pinned host -> device
  double d2h_ns_per_byte = 0;       // device -> pinned host
  double reduce_ns_per_byte = 0;    // the float32 sum, per byte of input
  std::array<DeviceQuantRates, 2> quant{};  // [0] int8, [1] int4
  // Provenance (written by hier-tune; not used by the costs).
  bool measured = false;
  std::string module, device;
  const DeviceQuantRates& q(int bits) const { return quant[bits == 4 ? 1 : 0]; }
  DeviceQuantRates& q(int bits) { return quant[bits == 4 ? 1 : 0]; }
};

// ASSUMED, not measured: no GPU has timed libhier's module yet (bench/RESULTS.md). Orders of
// magnitude from public figures of the GPUs libhier targets: HBM copies of about 1 TB/s (an
// H100 SXM's HBM3 is specified at 3.35 TB/s, an MI250X GCD's HBM2e at 1.6 TB/s; a copy reads
// and writes), 25 GB/s between pinned host memory and the device (PCIe 4 x16, as the datatype
// model's device built-ins assume), 10 us to launch a kernel and wait for it; the sum reads two
// bytes and writes one per byte of input (1.5x a copy), the quantization kernels read the floats
// and write a quarter (int8) or eighth (int4) of them.
inline DeviceRates builtin_device_rates() {
  DeviceRates r;
  r.step_ns = 10000;
  r.copy_ns_per_byte = 0.001;
  r.h2d_ns_per_byte = r.d2h_ns_per_byte = 0.04;
  r.reduce_ns_per_byte = 0.0015;
  r.quant[0] = r.quant[1] = {0.0015, 0.0012, 0.0015};
  return r;
}

}  // namespace hier::model
