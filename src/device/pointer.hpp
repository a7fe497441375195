// Where a buffer lives (host / device / managed), asked before libhier touches it with the CPU.
// GPU-aware programs hand MPI device pointers; the MPI copes, a host memcpy by libhier would
// fault. libhier never loads a GPU runtime itself: it asks only a runtime the program already
// loaded (HIP's libamdhip64, CUDA's driver libcuda.so.1), found with dlopen(RTLD_NOLOAD).
//
// A runtime loaded without a device (no GPU, or all masked) counts as no runtime, decided once
// (pointer.cpp says how).
//
// Cost: with no runtime in the process, classify() is one relaxed atomic load and a coarse
// clock read; the NOLOAD probe re-runs at most every ~100 ms, because a program may load its
// runtime after MPI_Init (PyTorch, CuPy). With a runtime, each call asks it (no cache: see
// pointer.cpp). Call it only where libhier would touch the buffer, never on passthrough paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace hier::device {

enum class MemKind : uint8_t { Host, Device, Managed };

// The GPU runtime found in the process, if any.
enum class Runtime : uint8_t { None, Cuda, Hip };

namespace pointer_detail {
// Runtime found (as Runtime); None until a probe finds one, and then never None again.
extern std::atomic<uint8_t> g_runtime;
// Monotonic coarse time (ns) before which no new probe runs.
extern std::atomic<int64_t> g_next_probe_ns;
int64_t coarse_now_ns();
Runtime probe();                      // the NOLOAD probe; sets g_runtime when it finds one
MemKind query(Runtime r, const void* p);  // asks the runtime
void* runtime_handle();                   // dlopen handle of the runtime found (null: none)
// Why a runtime loaded in this process counts as absent: it has no device (empty: no such runtime
// seen). Decided once by the probe; every buffer is host memory then.
const std::string& no_device_reason();
}  // namespace pointer_detail

// The runtime loaded in this process (probing again if the last probe is older than ~100 ms).
inline Runtime runtime() {
  using namespace pointer_detail;
  const auto r = static_cast<Runtime>(g_runtime.load(std::memory_order_relaxed));
  if (r != Runtime::None) return r;
  if (coarse_now_ns() < g_next_probe_ns.load(std::memory_order_relaxed)) return Runtime::None;
  return probe();
}

inline MemKind classify(const void* p) {
  const Runtime r = runtime();
  if (r == Runtime::None || p == nullptr) return MemKind::Host;
  return pointer_detail::query(r, p);
}

// The stronger of two kinds (Host < Device < Managed is not an order of badness; any non-host
// kind means "do not touch", and Device wins so that a call is counted once, as device).
inline MemKind worst(MemKind a, MemKind b) {
  if (a == MemKind::Device || b == MemKind::Device) return MemKind::Device;
  if (a == MemKind::Managed || b == MemKind::Managed) return MemKind::Managed;
  return MemKind::Host;
}

const char* to_string(Runtime r);

// Counts a call that libhier left to the MPI (or staged through it) because of a device or
// managed buffer, for the finalize report's "device" section. `what` is a short call family
// name ("allreduce", "send", "pack", ...), a string literal, whose prefix says the path the
// buffer took (the section's by_path): "staged..." copied to host memory by libhier,
// "passed..." handed as is to an MPI that did not say it takes device pointers, "kernel..."
// packed or unpacked by the GPU module's kernels, "hier_device..." run by libhier's schedule
// bound to the device buffers (exec/device_steps.hpp), "hier_staged..." the same with its
// message steps staged through host memory (exec/device_stage.hpp), any other handed to a
// GPU-aware one.
void note_untouched(MemKind k, const char* what);

}  // namespace hier::device
