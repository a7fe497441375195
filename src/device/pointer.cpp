// Pointer classification through the GPU runtime the program loaded (see pointer.hpp).
//
// ABIs used (stable across versions, so no header of either runtime is needed to build):
//   CUDA driver (libcuda.so.1): CUresult cuPointerGetAttribute(void* data, int attr,
//     unsigned long long ptr); CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2 (CU_MEMORYTYPE_HOST = 1,
//     DEVICE = 2, ARRAY = 3, UNIFIED = 4), CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;
//     CUDA_ERROR_INVALID_VALUE = 1 for memory CUDA does not know (plain host memory),
//     CUDA_ERROR_NOT_INITIALIZED = 3 before cuInit (no device memory can exist yet).
//     libcudart always loads the driver before it can allocate, so probing the driver suffices.
//   HIP (libamdhip64): hipError_t hipPointerGetAttribute(void* data, int attr, void* ptr), same
//     attribute numbers. Not hipPointerGetAttributes: its struct changed layout in ROCm 6. The
//     hipMemoryType values changed too (ROCm 5: Host 0, Device 1, Array 2, Unified 3, Managed 4;
//     ROCm 6: Unregistered 0, Host 1, Device 2, Managed 3, Array 10, Unified 11), so the major
//     version is taken from hipRuntimeGetVersion(int*) (or the soname) and only the values that
//     mean host memory are trusted: anything else counts as device, which is always safe.
//
// A runtime that is loaded but has no device (a ROCm or CUDA build on a CPU partition, GPUs
// masked, a login node) answers every query with an error: HIP 5.2 returns hipErrorInvalidDevice
// (101) for plain host memory. No device memory can exist there, so the probe asks for the device
// count once (hipGetDeviceCount, which initializes HIP itself; cuDeviceGetCount, whose "not
// initialized" before the program's cuInit decides nothing) and, where it is zero or an error that
// says "no device", decides for the whole process that every buffer is host memory: the runtime
// counts as absent and is never probed again. Per query, the errors that mean "this runtime cannot
// have made this memory" (invalid value, not initialized, deinitialized, no device, invalid device)
// count as host memory too; only an answer that is neither an error of those nor a host type
// counts as device.
//
// No per-allocation cache: a freed range can be handed out again as host or device memory and
// neither runtime tells us about frees, so a cached answer could send a device buffer to the
// host code. One query costs well under a microsecond, and it runs only on calls where libhier
// is about to copy or pack the whole buffer.
#include "device/pointer.hpp"

#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>

#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/hooks.hpp"
#include "device/staged_bytes.hpp"

namespace hier::device {
namespace pointer_detail {

void register_report();  // the report's "device" section (below)

std::atomic<uint8_t> g_runtime{static_cast<uint8_t>(Runtime::None)};
std::atomic<int64_t> g_next_probe_ns{0};

namespace {

constexpr int64_t kProbeEveryNs = 100'000'000;  // 100 ms
constexpr int kAttrMemoryType = 2;
constexpr int kAttrIsManaged = 8;

using QueryFn = int (*)(void* data, int attr, const void* ptr);  // both runtimes, by value
QueryFn g_query = nullptr;
using CountFn = int (*)(int* n);  // hipGetDeviceCount, cuDeviceGetCount
int g_hip_major = 0;
void* g_handle = nullptr;  // the runtime library's handle (device/runtime_copy.cpp looks up its copies)
std::mutex g_probe_mu;

void* noload(const char* name) { return dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL); }

// What a runtime found by the probe can do.
enum class Found { No, Yes, NoDevice };

// The runtime loaded without a device, as the report and hier-info say it (empty: not seen).
std::string g_no_device;
std::atomic<bool> g_no_device_seen{false};

Found no_device(const char* runtime, const char* lib, int rc, int n) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s (%s) is loaded but has no device (device count %d, error %d): every buffer is host memory",
                runtime, lib, n, rc);
  g_no_device = buf;
  g_no_device_seen.store(true, std::memory_order_release);
  return Found::NoDevice;
}

Found find_cuda() {
  void* h = noload("libcuda.so.1");
  if (!h) return Found::No;
  // CUdeviceptr is unsigned long long: passed by value in the same register as a pointer on
  // every 64-bit ABI libhier builds for.
  g_query = reinterpret_cast<QueryFn>(dlsym(h, "cuPointerGetAttribute"));
  if (!g_query) return Found::No;
  // CUDA_ERROR_NOT_INITIALIZED (3, before the program's cuInit) decides nothing: the queries
  // answer "host" until then. Any other error (no device 100, the toolkit's stub driver 34, an
  // insufficient driver 35, ...) or no device counted means the driver cannot run here.
  int n = -1;
  auto count = reinterpret_cast<CountFn>(dlsym(h, "cuDeviceGetCount"));
  const int rc = count ? count(&n) : 3;
  if ((rc != 0 && rc != 3) || (rc == 0 && n <= 0)) return no_device("cuda", "libcuda.so.1", rc, n);
  g_handle = h;
  return Found::Yes;  // the handle stays open: the runtime is in the process anyway
}

Found find_hip() {
  static const char* const names[] = {"libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5", "libamdhip64.so"};
  for (const char* n : names) {
    void* h = noload(n);
    if (!h) continue;
    g_query = reinterpret_cast<QueryFn>(dlsym(h, "hipPointerGetAttribute"));
    if (!g_query) return Found::No;  // before ROCm 5.0: no stable query, leave buffers to the MPI
    // hipGetDeviceCount initializes HIP and answers for good: hipErrorNoDevice (100), or any
    // other error (the runtime cannot run here), or zero devices, all mean host memory only.
    int count = -1;
    auto count_fn = reinterpret_cast<CountFn>(dlsym(h, "hipGetDeviceCount"));
    const int rc = count_fn ? count_fn(&count) : 0;
    if (!count_fn) count = 1;  // a stand-in runtime without the call: trust its queries
    if (rc != 0 || count <= 0) return no_device("hip", n, rc, count);
    g_handle = h;
    int v = 0;
    auto version = reinterpret_cast<int (*)(int*)>(dlsym(h, "hipRuntimeGetVersion"));
    if (version && version(&v) == 0 && v > 0) g_hip_major = v / 10000000;
    else g_hip_major = std::strcmp(n, "libamdhip64.so.5") == 0 ? 5 : 6;  // from the soname
    return Found::Yes;
  }
  return Found::No;
}

MemKind query_cuda(const void* p) {
  unsigned long long managed = 0;  // the driver writes a bool-sized or int-sized value
  if (g_query(&managed, kAttrIsManaged, p) == 0 && managed != 0) return MemKind::Managed;
  unsigned int type = 0;
  const int rc = g_query(&type, kAttrMemoryType, p);
  // Unknown to CUDA (1), not initialized (3), deinitialized (4), no device (100), invalid device
  // (101): memory this runtime cannot have made.
  if (rc == 1 || rc == 3 || rc == 4 || rc == 100 || rc == 101) return MemKind::Host;
  if (rc != 0) return MemKind::Device;  // cannot tell: do not touch
  return type == 1 ? MemKind::Host : MemKind::Device;
}

MemKind query_hip(const void* p) {
  unsigned long long managed = 0;
  if (g_query(&managed, kAttrIsManaged, p) == 0 && managed != 0) return MemKind::Managed;
  unsigned int type = 0;
  const int rc = g_query(&type, kAttrMemoryType, p);
  // hipErrorInvalidValue (1): memory HIP does not know; not initialized (3), deinitialized (4),
  // no device (100), invalid device (101): memory HIP cannot have made.
  if (rc == 1 || rc == 3 || rc == 4 || rc == 100 || rc == 101) return MemKind::Host;
  if (rc != 0) return MemKind::Device;
  if (g_hip_major >= 6) return type <= 1 ? MemKind::Host : type == 3 ? MemKind::Managed : MemKind::Device;
  return type == 0 ? MemKind::Host : type == 4 ? MemKind::Managed : MemKind::Device;
}

}  // namespace

int64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // vDSO, no system call
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Runtime probe() {
  std::lock_guard<std::mutex> lk(g_probe_mu);
  auto r = static_cast<Runtime>(g_runtime.load(std::memory_order_acquire));
  if (r != Runtime::None || g_no_device_seen.load(std::memory_order_relaxed)) return r;
  Found f = find_cuda();
  if (f == Found::Yes) r = Runtime::Cuda;
  else if (f == Found::No && (f = find_hip()) == Found::Yes) r = Runtime::Hip;
  if (f == Found::NoDevice) {
    // Decided once for the process: never probed again, every buffer is host memory.
    g_query = nullptr;
    g_next_probe_ns.store(INT64_MAX, std::memory_order_relaxed);
    base::note_info("device", g_no_device);
    register_report();
    return Runtime::None;
  }
  g_next_probe_ns.store(coarse_now_ns() + kProbeEveryNs, std::memory_order_relaxed);
  // Release: a thread that sees the runtime also sees g_query and g_hip_major.
  if (r != Runtime::None) g_runtime.store(static_cast<uint8_t>(r), std::memory_order_release);
  return r;
}

const std::string& no_device_reason() {
  static const std::string none;
  return g_no_device_seen.load(std::memory_order_acquire) ? g_no_device : none;
}

void* runtime_handle() {
  (void)g_runtime.load(std::memory_order_acquire);  // pairs with probe()'s release
  return g_handle;
}

MemKind query(Runtime r, const void* p) {
  (void)g_runtime.load(std::memory_order_acquire);  // pairs with probe()'s release
  return r == Runtime::Cuda ? query_cuda(p) : query_hip(p);
}

}  // namespace pointer_detail

const char* to_string(Runtime r) {
  switch (r) {
    case Runtime::Cuda: return "cuda";
    case Runtime::Hip: return "hip";
    default: return "none";
  }
}

namespace {
std::mutex g_count_mu;
std::map<std::string, uint64_t> g_device_calls, g_managed_calls;  // per call family
// Bytes the staged message steps copied, [to host, to device][values, records] (note_staged_bytes).
uint64_t g_staged_bytes[2][2] = {};

// The path of a call family, from its key (note_untouched): "staged..." copied to host memory
// by libhier, "passed..." handed to an MPI that did not say it takes device pointers,
// "kernel..." packed or unpacked by the GPU module's kernels, "hier_device..." libhier's
// schedule bound to the device buffers, "hier_staged..." the same with its message steps
// staged through host memory (an MPI that is not GPU-aware), any other handed to an MPI that
// takes device pointers (GPU-aware).
const char* path_of(const std::string& key) {
  if (key.rfind("staged", 0) == 0) return "staged";
  if (key.rfind("passed", 0) == 0) return "passed";
  if (key.rfind("kernel", 0) == 0) return "kernels";
  if (key.rfind("hier_device", 0) == 0) return "hier_device";
  if (key.rfind("hier_staged", 0) == 0) return "hier_staged";
  return "gpu_aware";
}

nlohmann::json counts(const std::map<std::string, uint64_t>& calls) {
  uint64_t total = 0;
  nlohmann::json by_call = nlohmann::json::object(),
                 by_path = {{"staged", 0}, {"gpu_aware", 0}, {"passed", 0}, {"kernels", 0}, {"hier_device", 0},
                           {"hier_staged", 0}};
  for (const auto& [k, n] : calls) {
    by_call[k] = n;
    by_path[path_of(k)] = by_path[path_of(k)].get<uint64_t>() + n;
    total += n;
  }
  return {{"calls", total}, {"by_call", by_call}, {"by_path", by_path}};
}

std::string report() {
  std::lock_guard<std::mutex> lk(g_count_mu);
  nlohmann::json j;
  j["runtime"] = to_string(static_cast<Runtime>(pointer_detail::g_runtime.load()));
  if (!pointer_detail::no_device_reason().empty()) j["runtime_without_device"] = pointer_detail::no_device_reason();
  j["device"] = counts(g_device_calls);
  j["managed"] = counts(g_managed_calls);
  const auto split = [](const uint64_t* b) { return nlohmann::json{{"values", b[0]}, {"records", b[1]}}; };
  j["staged_bytes"] = {{"to_host", split(g_staged_bytes[0])}, {"to_device", split(g_staged_bytes[1])}};
  return j.dump();
}
}  // namespace

namespace pointer_detail {
void register_report() {
  static const bool registered = (base::add_report_section("device", report), true);
  (void)registered;
}
}  // namespace pointer_detail

void note_untouched(MemKind k, const char* what) {
  if (k == MemKind::Host) return;
  pointer_detail::register_report();
  std::lock_guard<std::mutex> lk(g_count_mu);  // off the fast path: a GPU buffer was seen
  ++(k == MemKind::Device ? g_device_calls : g_managed_calls)[what];
}

void note_staged_bytes(bool to_host, bool records, int64_t bytes) {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lk(g_count_mu);  // (per staged step, beside its copies: not the host fast path)
  g_staged_bytes[to_host ? 0 : 1][records ? 1 : 0] += static_cast<uint64_t>(bytes);
}

}  // namespace hier::device
