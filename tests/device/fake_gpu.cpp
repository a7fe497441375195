// Stand-in for a GPU runtime and a GPU-aware MPI, for tests on machines without a GPU.
//
// "Device memory" is host memory mapped PROT_NONE: any access by host code faults. The MPI may
// use it (a GPU-aware MPI can): this library, preloaded before libhier.so, defines the PMPI_*
// entry points the tests reach and opens every region (PROT_READ|PROT_WRITE) for the duration
// of the real call (found with dlsym(RTLD_NEXT)), closing them again afterwards. So only host
// accesses made by libhier's own code between PMPI calls fault; the SIGSEGV handler says so in
// one line and exits 77.
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
  char* p;
  size_t n;
  int managed;
};
Region g_regions[256];
int g_count = 0;
int g_open = 0;  // nesting depth of PMPI calls (a PMPI may call another PMPI)

void protect_all(int prot) {
  for (int i = 0; i < g_count; ++i) mprotect(g_regions[i].p, g_regions[i].n, prot);
}

struct Open {
  Open() {
    if (g_open++ == 0) protect_all(PROT_READ | PROT_WRITE);
  }
  ~Open() {
    if (--g_open == 0) protect_all(PROT_NONE);
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
  void* p = mmap(nullptr, n, g_open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || g_count == 256) abort();
  g_regions[g_count++] = {static_cast<char*>(p), n, managed};
  return p;
}

void fake_gpu_copy(void* dst, const void* src, size_t bytes) {
  Open o;
  memcpy(dst, src, bytes);
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
