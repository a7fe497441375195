// The GPU backend modules: shared objects built from one kernel source (src/gpu/module.cu) for
// CUDA (libhier-cuda.so, nvcc), HIP (libhier-hip.so, hipcc) and a simulated device
// (libhier-sim.so, the host compiler; tests only). libhier.so never links a GPU runtime: it
// dlopens the module matching the runtime the program already loaded, and only then.
//
// The table below is the whole interface, plain C types and the block program's flat arrays
// (device/blocks.hpp), so that a module built by another compiler (nvcc, hipcc) links against
// nothing of libhier. Every entry returns 0 on success, else the runtime's error code; work is
// queued on `stream` (asynchronous) unless the entry says it synchronizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/blocks.hpp"
#include "device/reduce.hpp"

namespace hier::device {

// Bumped whenever the table or a type in it changes: a module of another version is refused.
// 3: host_alloc / host_release; 4: F16 values, quant_add, dequantize_sum, memset, events;
// 5: upload on a stream, quantize without a synchronize (a device counter of bad blocks), the
// current device and a pointer's device.
inline constexpr uint32_t kModuleAbi = 5;

// The quantization formats' element types (quant/format.hpp owns the records' layout). F16:
// IEEE binary16 (MPIX_C_FLOAT16), where the module's compiler has a 16-bit float (quant/f16.hpp);
// a module without one refuses F16 (an error, nothing queued).
enum class QuantType : uint8_t { F32, F64, F16 };

struct ModuleTable {
  uint32_t abi;      // kModuleAbi
  const char* name;  // "cuda", "hip", "sim"

  // Device memory and streams (a null stream is the runtime's default stream).
  int (*alloc)(void** p, size_t bytes);
  int (*release)(void* p);
  int (*stream_create)(void** s);
  int (*stream_destroy)(void* s);
  int (*sync)(void* s);  // waits until everything queued on s is done
  // n bytes, either side host or device memory of this runtime.
  int (*copy)(void* dst, const void* src, size_t n, void* s);

  // A block program copied to the current device's memory (at the datatype's first use on that
  // device): `prog` receives an opaque handle. Asynchronous on s: the copies are queued there,
  // and every later pack or unpack with the handle, on any stream of that device, first waits
  // for them on its own stream (an event; the host never waits). The program keeps its host
  // copy of the tables until discard, which waits for the copies before freeing anything.
  int (*upload)(const BlockProgram* p, void** prog, void* s);
  void (*discard)(void* prog);
  // count elements of the program between `strided` (element 0's origin) and `packed`, exactly
  // the bytes the host backend's pack/unpack moves (device/host.cpp).
  int (*pack)(const void* prog, const void* strided, int64_t count, void* packed, void* s);
  int (*unpack)(const void* prog, const void* packed, int64_t count, void* strided, void* s);

  // inout[i] = in[i] op inout[i] (device/reduce.hpp); an (op, type) pair MPI does not define is
  // an error (nothing queued).
  int (*reduce)(ReduceOp op, ElemType t, const void* in, void* inout, int64_t n, void* s);

  // Blockwise quantization (quant/kernels.hpp, quant/format.hpp). Asynchronous like every other
  // kernel: the number of blocks that could not be quantized (quant::quantize's result) is added
  // to *bad, a counter in memory of the stream's device (null: not counted), when the kernel
  // runs; the caller reads it after its next synchronization of s.
  int (*quantize)(int bits, QuantType t, const void* x, int64_t n, int64_t block, void* records,
                  unsigned long long* bad, void* s);
  // out[i] = value i (add == 0), or out[i] += value i (add != 0).
  int (*dequantize)(int bits, QuantType t, const void* records, int64_t n, int64_t block, void* out, int add,
                    void* s);
  // Error feedback (quant::feedback_block): r[i] = x[i] - value i of the records, 0 where not
  // finite (the quantized schedules' Quantize step on device buffers, exec/executor.cpp).
  int (*feedback)(int bits, QuantType t, const void* records, const void* x, int64_t n, int64_t block, void* r,
                  void* s);

  // Page-locked host memory (cudaMallocHost / hipHostMalloc): the staging buffers of message
  // steps under an MPI that is not GPU-aware (exec/device_stage.hpp), which copies to and from
  // the device reach at full speed and asynchronously on a stream.
  int (*host_alloc)(void** p, size_t bytes);
  int (*host_release)(void* p);

  // ABI 4.
  // x[i] = x[i] + r[i], computed in float (double for F64) and rounded to the type once: the
  // error feedback's x += r of every quantized type (16-bit values have no reduce kernel).
  int (*quant_add)(QuantType t, const void* r, void* x, int64_t n, void* s);
  // The fused dequantize-reduce of 16-bit values (quant::dequantize_sum_block): out[i] = the sum
  // of value i of the `parts` quantized buffers at records + k * part_bytes, in float, in part
  // order, rounded once. F16 only (float and double add part by part with dequantize).
  int (*dequantize_sum)(int bits, QuantType t, const void* records, int64_t part_bytes, int parts, int64_t n,
                        int64_t block, void* out, void* s);
  // n bytes of device memory set to `value`.
  int (*memset)(void* p, int value, size_t n, void* s);
  // Events: record marks the point of s reached by what was queued before it; wait blocks the
  // calling host thread until that point is done (not the work queued after it): a staged
  // message step waits for its own copy in, not for the whole stream (exec/device_stage.hpp).
  int (*event_create)(void** e);
  int (*event_destroy)(void* e);
  int (*event_record)(void* e, void* s);
  int (*event_wait)(void* e);

  // ABI 5. The calling thread's current device (the runtime's ordinal), making one current, and
  // the device that owns device memory p (-1: not device memory of this runtime). Streams,
  // allocations and kernels belong to the device current when they are made or queued.
  int (*get_device)(int* d);
  int (*set_device)(int d);
  int (*pointer_device)(const void* p, int* d);
};

// The one symbol a module exports: its table for ABI version `abi`, or null (another version,
// or the runtime it needs is not usable in this process).
using ModuleEntry = const ModuleTable* (*)(uint32_t abi);
inline constexpr const char* kModuleEntry = "hier_device_module";

// The module for the runtime loaded in this process (device::runtime()), loaded on first use:
//   `setting` (HIER_GPU_MODULE, passed in by the layers that read the settings): "auto" takes
//   libhier-cuda.so / libhier-hip.so from libhier.so's own directory, "off" never loads one, any
//   other value is a module's path.
// Null: no runtime, "off", or the module could not be loaded (said once on stderr when the path
// was given explicitly). The answer never changes once a module is loaded.
const ModuleTable* module(const char* setting);

// The module's own stream on the calling thread's current device, for the work that belongs to
// no communicator (datatype packing, tools): one per device ordinal, made at its first use with
// that device current (null: the default stream, where one could not be made).
void* module_stream();

// The module's state is kept per device ordinal, below this many (a device above it is staged).
inline constexpr int kMaxDevices = 16;

// The device of device memory p (-1: none, or no module).
int device_of(const void* p);
// The calling thread's current device (0 without a module).
int current_device();

// Makes device d current on this thread for the scope, and the caller's again at its end; d < 0
// or the device already current changes nothing.
class DeviceScope {
 public:
  explicit DeviceScope(int d);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int restore_ = -1;
};

}  // namespace hier::device
