// Stand-in for a GPU runtime and an MPI, GPU-aware or not, for tests on machines without a GPU.
//
// "Device memory" is a memfd mapped twice: the "device" addresses the program sees, PROT_NONE
// for good, so any access by host code faults, on any thread at any time; and a read-write
// alias of the same pages at a fixed distance (through_alias) that only the runtime's copies
// (fake_gpu_copy, the test's cudaMemcpy, cuMemcpy in fake_cuda.cpp), the simulated GPU module's
// kernels (hier_sim_alias) and the stand-in GPU-aware MPI use.
// FAKE_GPU_AWARE=1: the MPI is GPU-aware. This library, preloaded before libhier.so, defines the
// PMPI_* entry points the tests reach with device buffers and hands the real MPI (found with
// dlsym(RTLD_NEXT)) the alias of every buffer argument (FAKE_PMPI: every void* / const void*;
// counts, types, statuses, requests and host addresses as they are, MPI_IN_PLACE and
// MPI_BOTTOM too), and MPIX_Query_cuda_support / MPIX_GPU_query_support answer 1. A nonblocking
// or persistent call's request keeps the alias, so its Wait, Test or Start needs nothing; a
// call that reaches the MPI with a device pointer and has no wrapper here faults inside the MPI
// (add it below). Nothing ever opens the device addresses, so a host access by libhier's code
// faults even while another thread (libhier's progress thread, or the program's) is inside the
// MPI. Not translatable: a datatype built from absolute device addresses and used on MPI_BOTTOM
// (the addresses live inside the type); no test hands one device memory.
// FAKE_GPU_AWARE=0 (default): an MPI that is not GPU-aware. No wrapper translates, and the
// queries answer 0: a device pointer that reaches the MPI faults there.
// A fault in a region makes the SIGSEGV handler say so in one line and exit 77.
//
// The pointer query itself lives in fake_cuda.cpp (soname libcuda.so.1), so that a test can
// load the "runtime" late, or not at all (the negative control: libhier blind must crash).
#include "fake_gpu.h"

#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Region {
  char* p;      // the "device" addresses
  char* alias;  // the same pages, read-write, for the runtime's copies
  size_t n;
  int managed;
  int device;   // the device current on the allocating thread
};

// FAKE_GPU_DEVICES=N (default 1): the machine's devices, 0..N-1, with one current device per
// thread (0 at first), as a runtime's cudaSetDevice / hipSetDevice keep it.
int device_count() {
  static const int n = [] {
    const char* v = std::getenv("FAKE_GPU_DEVICES");
    const int d = v ? std::atoi(v) : 1;
    return d >= 1 && d <= 64 ? d : 1;
  }();
  return n;
}
thread_local int t_device = 0;
// Every allocation lies in one reserved arena: device addresses in its first half, their
// read-write aliases at the same offsets in the second, so that an address computed from a
// device pointer (a datatype's origin before its first byte, too) has its alias at a fixed
// distance. Allocations are kGuard apart and never reused, so a stray access faults.
constexpr size_t kArenaHalf = size_t{16} << 30, kGuard = size_t{1} << 20;
std::atomic<char*> g_arena{nullptr};
size_t g_next = 0;  // next free offset in the device half (under g_alloc_mu)
char* arena() {
  char* a = g_arena.load();
  if (!a) {
    void* m = mmap(nullptr, 2 * kArenaHalf, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) abort();
    a = static_cast<char*>(m);
    g_arena.store(a, std::memory_order_release);
    g_next = kGuard;
  }
  return a;
}
constexpr int kMaxRegions = 4096;
Region g_regions[kMaxRegions];
std::atomic<int> g_count{0};  // regions [0, g_count) are written (a freed one has n == 0)
std::mutex g_alloc_mu;

bool mpi_gpu_aware() {
  static const bool aware = [] {
    const char* v = std::getenv("FAKE_GPU_AWARE");
    return v && v[0] == '1';
  }();
  return aware;
}

const Region* find(const void* a) {
  for (int i = 0, n = g_count.load(std::memory_order_acquire); i < n; ++i)
    if (static_cast<const char*>(a) >= g_regions[i].p && static_cast<const char*>(a) < g_regions[i].p + g_regions[i].n)
      return &g_regions[i];
  return nullptr;
}

void on_segv(int sig, siginfo_t* si, void*) {
  if (find(si->si_addr)) {
    static const char msg[] = "FAKE_GPU: host access to device memory\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(77);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) void install() {
  struct sigaction sa = {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

void* fake_gpu_alloc(size_t bytes, int managed) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = (bytes + page - 1) / page * page;
  std::lock_guard<std::mutex> lk(g_alloc_mu);
  char* const base = arena();
  if (g_next + n + kGuard > kArenaHalf) abort();  // the test asked for more than the arena
  int i = 0;
  const int count = g_count.load(std::memory_order_relaxed);
  while (i < count && g_regions[i].n) ++i;  // a freed slot, else a new one
  if (i == kMaxRegions) abort();
  const int fd = memfd_create("fake_gpu", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(n)) != 0) abort();
  char* p = base + g_next;
  g_next += n + kGuard;
  void* dev = mmap(p, n, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0);
  void* alias = mmap(p + kArenaHalf, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  close(fd);
  if (dev == MAP_FAILED || alias == MAP_FAILED) abort();
  g_regions[i] = {p, p + kArenaHalf, n, managed, t_device};
  if (i == count) g_count.store(count + 1, std::memory_order_release);
  return p;
}

void fake_gpu_free(void* p) {
  std::lock_guard<std::mutex> lk(g_alloc_mu);
  for (int i = 0, n = g_count.load(); i < n; ++i)
    if (g_regions[i].p == p && g_regions[i].n) {
      // Back to reserved, inaccessible address space (never handed out again).
      for (char* a : {g_regions[i].p, g_regions[i].alias})
        mmap(a, g_regions[i].n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
      g_regions[i].n = 0;
      return;
    }
}

// FAKE_GPU_FAIL (fake_gpu.h), parsed once; each rule counts the calls of its entry point.
namespace {
struct FailRule {
  char call[48];
  long nth;
  bool onward;
  int code;
  std::atomic<long> seen{0};
};
constexpr int kMaxRules = 8;
FailRule g_rules[kMaxRules];
int g_nrules = 0;
std::once_flag g_rules_once;

void parse_rules() {
  const char* v = std::getenv("FAKE_GPU_FAIL");
  while (v && *v && g_nrules < kMaxRules) {
    const char* end = std::strchr(v, ',');
    const size_t len = end ? static_cast<size_t>(end - v) : std::strlen(v);
    char rule[128] = {};
    std::memcpy(rule, v, len < sizeof rule - 1 ? len : sizeof rule - 1);
    char* c1 = std::strchr(rule, ':');
    char* c2 = c1 ? std::strchr(c1 + 1, ':') : nullptr;
    if (!c1 || !c2 || static_cast<size_t>(c1 - rule) >= sizeof g_rules[0].call) {
      std::fprintf(stderr, "FAKE_GPU_FAIL: rule '%s' is not call:n[+]:code\n", rule);
      std::exit(2);
    }
    FailRule& r = g_rules[g_nrules++];
    std::memcpy(r.call, rule, static_cast<size_t>(c1 - rule));
    r.nth = std::strtol(c1 + 1, nullptr, 10);
    r.onward = c2[-1] == '+';
    r.code = std::atoi(c2 + 1);
    v = end ? end + 1 : nullptr;
  }
}
}  // namespace

int fake_gpu_fail(const char* call) {
  std::call_once(g_rules_once, parse_rules);
  for (int i = 0; i < g_nrules; ++i) {
    FailRule& r = g_rules[i];
    if (std::strcmp(r.call, call) != 0) continue;
    const long n = r.seen.fetch_add(1) + 1;
    if (n == r.nth || (r.onward && n > r.nth)) return r.code;
  }
  return 0;
}
int hier_sim_fail(const char* call) { return fake_gpu_fail(call); }

// The simulated device's hooks for the GPU module libhier-sim.so (src/gpu/sim_runtime.hpp): its
// allocations are this device's memory, and its kernels work through the aliases.
void* hier_sim_alloc(size_t bytes) { return fake_gpu_alloc(bytes ? bytes : 1, 0); }
void hier_sim_free(void* p) { fake_gpu_free(p); }
void* hier_sim_alias(const void* p);

// How the simulated kernels run their lanes (src/gpu/sim_runtime.cpp, "lanes as fibers"):
// FAKE_GPU_LANES=fibers (default: a block's lanes take turns on the stream's thread, fast on a
// loaded machine) or threads (every lane an OS thread, as the race tests want). Read once; a
// value that is neither stops the process with one line.
int hier_sim_fiber_lanes(void) {
  static const int fibers = [] {
    const char* v = std::getenv("FAKE_GPU_LANES");
    if (!v || !*v || std::strcmp(v, "fibers") == 0) return 1;
    if (std::strcmp(v, "threads") == 0) return 0;
    std::fprintf(stderr, "fake gpu: FAKE_GPU_LANES=%s: allowed values are fibers and threads\n", v);
    std::exit(2);
  }();
  return fibers;
}

// An address in the device half of the arena (an allocation, or a little before or after one,
// as a derived type's origin may be) as the same place in the alias half; others as they are.
static void* through_alias(const void* a) {
  const char* c = static_cast<const char*>(a);
  char* const base = g_arena.load(std::memory_order_acquire);
  return const_cast<char*>(base && c >= base && c < base + kArenaHalf ? c + kArenaHalf : c);
}
void* hier_sim_alias(const void* p) { return through_alias(p); }

void fake_gpu_copy(void* dst, const void* src, size_t bytes) {
  memcpy(through_alias(dst), through_alias(src), bytes);
}

// The MPI's answers to "are you GPU-aware?" (Open MPI's and MPICH's forms): found by libhier's
// dlsym(RTLD_DEFAULT) before the real MPI's, since this library is preloaded first.
int MPIX_Query_cuda_support(void) { return mpi_gpu_aware() ? 1 : 0; }
int MPIX_GPU_query_support(int gpu_type, int* supported) {
  *supported = gpu_type == 0 && mpi_gpu_aware() ? 1 : 0;
  return MPI_SUCCESS;
}

int fake_gpu_kind(const void* p) {
  const Region* r = find(p);
  return !r ? 0 : r->managed ? 3 : 2;
}

int fake_gpu_device_count(void) { return device_count(); }
int fake_gpu_get_device(void) { return t_device; }
int fake_gpu_set_device(int d) {
  if (d < 0 || d >= device_count()) return 101;  // invalid device (both runtimes' code)
  t_device = d;
  return 0;
}
int fake_gpu_device_of(const void* p) {
  const Region* r = find(p);
  return r ? r->device : -1;
}
// The simulated module's view of the same machine (src/gpu/sim_device.cpp).
int hier_sim_get_device(void) { return t_device; }
int hier_sim_set_device(int d) { return fake_gpu_set_device(d); }
int hier_sim_device_of(const void* p) { return fake_gpu_device_of(p); }

// The record of the simulated streams' operations (hier_sim_span), kept while tracing is on.
namespace {
constexpr int kMaxOps = 1 << 16;
FakeGpuOp g_ops[kMaxOps];
std::atomic<int> g_nops{0};
std::atomic<bool> g_tracing{false};
// And the PMPI calls that reached the wrappers below meanwhile (fake_gpu_trace_mpi).
constexpr int kMaxCalls = 1 << 12;
FakeGpuMpiCall g_calls[kMaxCalls];
std::atomic<int> g_ncalls{0};
}  // namespace
static void fake_gpu_note_mpi(const char* name) {
  if (!g_tracing.load(std::memory_order_acquire)) return;
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  const int i = g_ncalls.fetch_add(1);
  if (i < kMaxCalls) g_calls[i] = {name, static_cast<long long>(t.tv_sec) * 1000000000ll + t.tv_nsec};
}
// The gate (fake_gpu_gate): the stream held, and whether an operation of another stream ended.
std::mutex g_gate_mu;
std::condition_variable g_gate_cv;
bool g_gate_armed = false, g_gate_other = false;
const void* g_gate_held = nullptr;

std::atomic<long> g_ops_on[64];  // simulated stream operations begun, per device

std::atomic<int> g_slow_us{0};  // fake_gpu_slow

void hier_sim_begin(const void* stream, int device) {
  if (device >= 0 && device < 64) g_ops_on[device].fetch_add(1);
  if (const int us = g_slow_us.load(std::memory_order_relaxed)) std::this_thread::sleep_for(std::chrono::microseconds(us));
  std::unique_lock<std::mutex> lk(g_gate_mu);
  if (!g_gate_armed || g_gate_held) return;
  g_gate_held = stream;
  g_gate_cv.wait_for(lk, std::chrono::seconds(3), [] { return g_gate_other; });
  g_gate_armed = false;
  g_gate_held = nullptr;
}
void hier_sim_span(const void* stream, const char* what, uint64_t q, uint64_t t0, uint64_t t1) {
  if (g_tracing.load(std::memory_order_acquire)) {
    const int i = g_nops.fetch_add(1);
    if (i < kMaxOps)
      g_ops[i] = {stream, what, static_cast<long long>(q), static_cast<long long>(t0), static_cast<long long>(t1)};
  }
  std::lock_guard<std::mutex> lk(g_gate_mu);
  if (g_gate_held && stream != g_gate_held) {
    g_gate_other = true;
    g_gate_cv.notify_all();
  }
}
long fake_gpu_ops_on(int device) { return device >= 0 && device < 64 ? g_ops_on[device].load() : 0; }
void fake_gpu_gate(void) {
  std::lock_guard<std::mutex> lk(g_gate_mu);
  g_gate_armed = true;
  g_gate_other = false;
  g_gate_held = nullptr;
}
void fake_gpu_trace(int on) {
  if (on) g_nops.store(0), g_ncalls.store(0);
  g_tracing.store(on != 0, std::memory_order_release);
}
int fake_gpu_trace_read(FakeGpuOp* out, int max) {
  const int n = std::min(g_nops.load(), kMaxOps);
  for (int i = 0; i < n && i < max; ++i) out[i] = g_ops[i];
  return n < max ? n : max;
}
int fake_gpu_trace_mpi(FakeGpuMpiCall* out, int max) {
  const int n = std::min(g_ncalls.load(), kMaxCalls);
  for (int i = 0; i < n && i < max; ++i) out[i] = g_calls[i];
  return n < max ? n : max;
}
void fake_gpu_slow(int us) { g_slow_us.store(us < 0 ? 0 : us, std::memory_order_relaxed); }

}  // extern "C"

namespace {
// What the GPU-aware MPI is handed for each argument: a buffer (void*, const void*) as its
// alias when the MPI is GPU-aware (through_alias leaves host addresses, MPI_IN_PLACE and
// MPI_BOTTOM alone); anything else (int*, MPI_Datatype, MPI_Status*, MPI_Request*...) as it is.
// The non-templates win for exactly void* and const void*, the template for every other type.
void* alias_arg(void* p) { return mpi_gpu_aware() ? through_alias(p) : p; }
const void* alias_arg(const void* p) { return mpi_gpu_aware() ? through_alias(p) : p; }
template <class T>
T alias_arg(T x) {
  return x;
}
// fn, called with every argument through alias_arg.
template <class R, class... P>
auto with_aliases(R (*fn)(P...)) {
  return [fn](P... a) { return fn(alias_arg(a)...); };
}
}  // namespace

extern "C" {

// The entry points the tests reach with device buffers, in both MPIs' signatures.
#define FAKE_PMPI(name, params, args)                   \
  int name params {                                     \
    static auto fn = with_aliases(real<int(*) params>(#name)); \
    fake_gpu_note_mpi(#name);                           \
    return fn args;                                     \
  }

FAKE_PMPI(PMPI_Allreduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
FAKE_PMPI(PMPI_Reduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c),
          (s, r, n, t, op, root, c))
FAKE_PMPI(PMPI_Bcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c))
FAKE_PMPI(PMPI_Allgather, (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c),
          (s, sn, st, r, rn, rt, c))
FAKE_PMPI(PMPI_Allgatherv,
          (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, MPI_Comm c),
          (s, sn, st, r, rn, d, rt, c))
FAKE_PMPI(PMPI_Reduce_scatter, (const void* s, void* r, const int* rn, MPI_Datatype t, MPI_Op op, MPI_Comm c),
          (s, r, rn, t, op, c))
FAKE_PMPI(PMPI_Reduce_scatter_block, (const void* s, void* r, int rn, MPI_Datatype t, MPI_Op op, MPI_Comm c),
          (s, r, rn, t, op, c))
FAKE_PMPI(PMPI_Alltoall, (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c),
          (s, sn, st, r, rn, rt, c))
FAKE_PMPI(PMPI_Send, (const void* b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c), (b, n, t, d, tag, c))
FAKE_PMPI(PMPI_Isend, (const void* b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request* q),
          (b, n, t, d, tag, c, q))
FAKE_PMPI(PMPI_Recv, (void* b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status* st),
          (b, n, t, s, tag, c, st))
FAKE_PMPI(PMPI_Irecv, (void* b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request* q),
          (b, n, t, s, tag, c, q))
FAKE_PMPI(PMPI_Sendrecv,
          (const void* sb, int sn, MPI_Datatype st, int d, int stag, void* rb, int rn, MPI_Datatype rt, int s, int rtag,
           MPI_Comm c, MPI_Status* status),
          (sb, sn, st, d, stag, rb, rn, rt, s, rtag, c, status))
FAKE_PMPI(PMPI_Pack, (const void* in, int n, MPI_Datatype t, void* out, int size, int* pos, MPI_Comm c),
          (in, n, t, out, size, pos, c))
FAKE_PMPI(PMPI_Unpack, (const void* in, int size, int* pos, void* out, int n, MPI_Datatype t, MPI_Comm c),
          (in, size, pos, out, n, t, c))

}  // extern "C"

// The nonblocking collectives mixed_test.cpp gives device pointers on a GPU-aware MPI.
extern "C" {
FAKE_PMPI(PMPI_Iallreduce,
          (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
          (s, r, n, t, op, c, q))
FAKE_PMPI(PMPI_Ibcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q), (b, n, t, root, c, q))
}  // extern "C"

// The other level steps libhier's executor issues (exec/executor.cpp), which its schedules
// bound to device buffers hand device pointers (exec/device_steps.hpp), blocking and, in
// pipelined waves, nonblocking.
extern "C" {
FAKE_PMPI(PMPI_Scatterv,
          (const void* s, const int* sn, const int* d, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root,
           MPI_Comm c),
          (s, sn, d, st, r, rn, rt, root, c))
FAKE_PMPI(PMPI_Gatherv,
          (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, int root,
           MPI_Comm c),
          (s, sn, st, r, rn, d, rt, root, c))
FAKE_PMPI(PMPI_Iscatterv,
          (const void* s, const int* sn, const int* d, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root,
           MPI_Comm c, MPI_Request* q),
          (s, sn, d, st, r, rn, rt, root, c, q))
FAKE_PMPI(PMPI_Igatherv,
          (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, int root,
           MPI_Comm c, MPI_Request* q),
          (s, sn, st, r, rn, d, rt, root, c, q))
FAKE_PMPI(PMPI_Ireduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Request* q),
          (s, r, n, t, op, root, c, q))
FAKE_PMPI(PMPI_Iallgather,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c, MPI_Request* q),
          (s, sn, st, r, rn, rt, c, q))
FAKE_PMPI(PMPI_Iallgatherv,
          (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, MPI_Comm c,
           MPI_Request* q),
          (s, sn, st, r, rn, d, rt, c, q))
FAKE_PMPI(PMPI_Ireduce_scatter,
          (const void* s, void* r, const int* rn, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
          (s, r, rn, t, op, c, q))
FAKE_PMPI(PMPI_Ireduce_scatter_block,
          (const void* s, void* r, int rn, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q), (s, r, rn, t, op, c, q))
// The alltoall schedules' level steps, and the quantized schedules' exchange of records
// (sched/build_quant.cpp; blocking, and nonblocking in pipelined waves).
FAKE_PMPI(PMPI_Alltoallv,
          (const void* s, const int* sn, const int* sd, MPI_Datatype st, void* r, const int* rn, const int* rd,
           MPI_Datatype rt, MPI_Comm c),
          (s, sn, sd, st, r, rn, rd, rt, c))
FAKE_PMPI(PMPI_Ialltoall,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c, MPI_Request* q),
          (s, sn, st, r, rn, rt, c, q))
FAKE_PMPI(PMPI_Ialltoallv,
          (const void* s, const int* sn, const int* sd, MPI_Datatype st, void* r, const int* rn, const int* rd,
           MPI_Datatype rt, MPI_Comm c, MPI_Request* q),
          (s, sn, sd, st, r, rn, rd, rt, c, q))
}  // extern "C"

// The collectives libhier forwards to the MPI as they are (src/core/forwarded_colls.def; Gatherv,
// Scatterv, Alltoallv and their I-forms are above), and MPI_Gather / MPI_Scatter, which a
// GPU-aware MPI without the GPU module gets (tests/coll's device_kernels variant with a module
// that fails to load found them missing): a GPU-aware MPI takes their device buffers.
extern "C" {
FAKE_PMPI(PMPI_Alltoallw,
          (const void* s, const int* sn, const int* sd, const MPI_Datatype* st, void* r, const int* rn, const int* rd,
           const MPI_Datatype* rt, MPI_Comm c),
          (s, sn, sd, st, r, rn, rd, rt, c))
FAKE_PMPI(PMPI_Ialltoallw,
          (const void* s, const int* sn, const int* sd, const MPI_Datatype* st, void* r, const int* rn, const int* rd,
           const MPI_Datatype* rt, MPI_Comm c, MPI_Request* q),
          (s, sn, sd, st, r, rn, rd, rt, c, q))
FAKE_PMPI(PMPI_Gather,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c),
          (s, sn, st, r, rn, rt, root, c))
FAKE_PMPI(PMPI_Scatter,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c),
          (s, sn, st, r, rn, rt, root, c))
FAKE_PMPI(PMPI_Scan, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
FAKE_PMPI(PMPI_Exscan, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
FAKE_PMPI(PMPI_Iscan, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
          (s, r, n, t, op, c, q))
FAKE_PMPI(PMPI_Iexscan, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
          (s, r, n, t, op, c, q))
}  // extern "C"

// MPI_Sendrecv_replace and the large-count point-to-point forms (tests/device/device_p2p_test.cpp),
// which a GPU-aware MPI is handed device pointers in for the types libhier passes through.
extern "C" {
FAKE_PMPI(PMPI_Sendrecv_replace,
          (void* b, int n, MPI_Datatype t, int d, int stag, int s, int rtag, MPI_Comm c, MPI_Status* st),
          (b, n, t, d, stag, s, rtag, c, st))
#if MPI_VERSION >= 4
FAKE_PMPI(PMPI_Send_c, (const void* b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm c), (b, n, t, d, tag, c))
FAKE_PMPI(PMPI_Isend_c, (const void* b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request* q),
          (b, n, t, d, tag, c, q))
FAKE_PMPI(PMPI_Recv_c, (void* b, MPI_Count n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status* st),
          (b, n, t, s, tag, c, st))
FAKE_PMPI(PMPI_Irecv_c, (void* b, MPI_Count n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request* q),
          (b, n, t, s, tag, c, q))
FAKE_PMPI(PMPI_Sendrecv_c,
          (const void* sb, MPI_Count sn, MPI_Datatype st, int d, int stag, void* rb, MPI_Count rn, MPI_Datatype rt, int s,
           int rtag, MPI_Comm c, MPI_Status* status),
          (sb, sn, st, d, stag, rb, rn, rt, s, rtag, c, status))
FAKE_PMPI(PMPI_Sendrecv_replace_c,
          (void* b, MPI_Count n, MPI_Datatype t, int d, int stag, int s, int rtag, MPI_Comm c, MPI_Status* st),
          (b, n, t, d, stag, s, rtag, c, st))
#endif
}  // extern "C"

// The persistent collectives (MPI 4.0: MPICH 4.0; Open MPI 4.1 has none) that libhier leaves to
// a GPU-aware MPI with their device buffers, which the MPI moves at each MPI_Start: those it does
// not rewrite (HIER_ALGO=flat, a flat plan, a one-rank communicator). Without them the
// nonblocking suite's Persistent test on device buffers (TEST_ON_DEVICE=1) under HIER_ALGO=flat
// faults in MPICH's MPI_Start.
extern "C" {
#if MPI_VERSION >= 4
FAKE_PMPI(PMPI_Allreduce_init,
          (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, r, n, t, op, c, i, q))
FAKE_PMPI(PMPI_Bcast_init, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (b, n, t, root, c, i, q))
FAKE_PMPI(PMPI_Reduce_init,
          (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, r, n, t, op, root, c, i, q))
FAKE_PMPI(PMPI_Reduce_scatter_init,
          (const void* s, void* r, const int* rn, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, r, rn, t, op, c, i, q))
FAKE_PMPI(PMPI_Reduce_scatter_block_init,
          (const void* s, void* r, int rn, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, r, rn, t, op, c, i, q))
FAKE_PMPI(PMPI_Scan_init,
          (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, r, n, t, op, c, i, q))
FAKE_PMPI(PMPI_Exscan_init,
          (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, r, n, t, op, c, i, q))
FAKE_PMPI(PMPI_Allgather_init,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c, MPI_Info i,
           MPI_Request* q),
          (s, sn, st, r, rn, rt, c, i, q))
FAKE_PMPI(PMPI_Allgatherv_init,
          (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, MPI_Comm c,
           MPI_Info i, MPI_Request* q),
          (s, sn, st, r, rn, d, rt, c, i, q))
FAKE_PMPI(PMPI_Alltoall_init,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c, MPI_Info i,
           MPI_Request* q),
          (s, sn, st, r, rn, rt, c, i, q))
FAKE_PMPI(PMPI_Alltoallv_init,
          (const void* s, const int* sn, const int* sd, MPI_Datatype st, void* r, const int* rn, const int* rd,
           MPI_Datatype rt, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, sn, sd, st, r, rn, rd, rt, c, i, q))
FAKE_PMPI(PMPI_Alltoallw_init,
          (const void* s, const int* sn, const int* sd, const MPI_Datatype* st, void* r, const int* rn, const int* rd,
           const MPI_Datatype* rt, MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, sn, sd, st, r, rn, rd, rt, c, i, q))
FAKE_PMPI(PMPI_Gather_init,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c, MPI_Info i,
           MPI_Request* q),
          (s, sn, st, r, rn, rt, root, c, i, q))
FAKE_PMPI(PMPI_Gatherv_init,
          (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, int root,
           MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, sn, st, r, rn, d, rt, root, c, i, q))
FAKE_PMPI(PMPI_Scatter_init,
          (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c, MPI_Info i,
           MPI_Request* q),
          (s, sn, st, r, rn, rt, root, c, i, q))
FAKE_PMPI(PMPI_Scatterv_init,
          (const void* s, const int* sn, const int* d, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root,
           MPI_Comm c, MPI_Info i, MPI_Request* q),
          (s, sn, d, st, r, rn, rt, root, c, i, q))
#endif
}  // extern "C"
