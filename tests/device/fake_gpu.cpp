// Stand-in for a GPU runtime and an MPI, GPU-aware or not, for tests on machines without a GPU.
//
// "Device memory" is a memfd mapped twice: the "device" addresses the program sees, PROT_NONE,
// so any access by host code faults; and a read-write alias that only the runtime's copies use
// (fake_gpu_copy, the test's cudaMemcpy, and cuMemcpy in fake_cuda.cpp), so copying never opens
// the device addresses to another thread.
// FAKE_GPU_AWARE=1: the MPI is GPU-aware. This library, preloaded before libhier.so, defines the
// PMPI_* entry points the tests reach and opens every region (PROT_READ|PROT_WRITE) for the
// duration of the real call (found with dlsym(RTLD_NEXT)), closing them again afterwards, and
// MPIX_Query_cuda_support / MPIX_GPU_query_support answer 1. So only host accesses made by
// libhier's own code between PMPI calls fault.
// FAKE_GPU_AWARE=0 (default): an MPI that is not GPU-aware. The regions stay closed inside the
// MPI too, and the queries answer 0: a device pointer that reaches the MPI faults there.
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
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

struct Region {
  char* p;      // the "device" addresses
  char* alias;  // the same pages, read-write, for the runtime's copies
  size_t n;
  int managed;
};
Region g_regions[256];
int g_count = 0;
int g_open = 0;  // nesting depth of PMPI calls (a PMPI may call another PMPI)

bool mpi_gpu_aware() {
  static const bool aware = [] {
    const char* v = std::getenv("FAKE_GPU_AWARE");
    return v && v[0] == '1';
  }();
  return aware;
}

void protect_all(int prot) {
  for (int i = 0; i < g_count; ++i) mprotect(g_regions[i].p, g_regions[i].n, prot);
}

// Open for the duration of a PMPI call, when the MPI is GPU-aware.
struct Open {
  Open() {
    if (mpi_gpu_aware() && g_open++ == 0) protect_all(PROT_READ | PROT_WRITE);
  }
  ~Open() {
    if (mpi_gpu_aware() && --g_open == 0) protect_all(PROT_NONE);
  }
};

const Region* find(const void* a) {
  for (int i = 0; i < g_count; ++i)
    if (static_cast<const char*>(a) >= g_regions[i].p && static_cast<const char*>(a) < g_regions[i].p + g_regions[i].n)
      return &g_regions[i];
  return nullptr;
}

void on_segv(int sig, siginfo_t* si, void*) {
  if (find(si->si_addr)) {
    static const char msg[] = "FAKE_GPU: host access to device memory outside the MPI\n";
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
  const int fd = memfd_create("fake_gpu", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(n)) != 0 || g_count == 256) abort();
  void* p = mmap(nullptr, n, g_open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_SHARED, fd, 0);
  void* alias = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED || alias == MAP_FAILED) abort();
  g_regions[g_count++] = {static_cast<char*>(p), static_cast<char*>(alias), n, managed};
  return p;
}

// A "device" address as its read-write alias; other addresses as they are.
static void* through_alias(const void* a) {
  const Region* r = find(a);
  const char* c = static_cast<const char*>(a);
  return const_cast<char*>(r ? r->alias + (c - r->p) : c);
}

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

// The entry points the tests reach with device buffers, in both MPIs' signatures.
#define FAKE_PMPI(name, params, args)              \
  int name params {                                \
    static auto fn = real<int(*) params>(#name);   \
    Open o;                                        \
    return fn args;                                \
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
FAKE_PMPI(PMPI_Wait, (MPI_Request* q, MPI_Status* s), (q, s))
FAKE_PMPI(PMPI_Waitall, (int n, MPI_Request* q, MPI_Status* s), (n, q, s))
FAKE_PMPI(PMPI_Test, (MPI_Request* q, int* f, MPI_Status* s), (q, f, s))
FAKE_PMPI(PMPI_Pack, (const void* in, int n, MPI_Datatype t, void* out, int size, int* pos, MPI_Comm c),
          (in, n, t, out, size, pos, c))
FAKE_PMPI(PMPI_Unpack, (const void* in, int size, int* pos, void* out, int n, MPI_Datatype t, MPI_Comm c),
          (in, size, pos, out, n, t, c))

}  // extern "C"

// The nonblocking collectives mixed_test.cpp gives device pointers on a GPU-aware MPI: the MPI
// may move data when the call starts, not only in MPI_Wait.
extern "C" {
FAKE_PMPI(PMPI_Iallreduce,
          (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
          (s, r, n, t, op, c, q))
FAKE_PMPI(PMPI_Ibcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q), (b, n, t, root, c, q))
}  // extern "C"
