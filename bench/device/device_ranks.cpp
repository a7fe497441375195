// The GPU check's multi-rank step (tools/gpu-check.sh run, step 5): collectives on device buffers
// through libhier (preloaded, its GPU module HIER_GPU_MODULE) on ranks that share one device,
// each checked against the same call done by hand (copy to host, the MPI call on host buffers,
// copy back) and both timed: allreduce in int32, allreduce, reduce_scatter_block, allgather and
// bcast in float, whose values (small integers) make any order of the sum exact, so the two
// results must be the same bits; with --int8 (the run sets HIER_QUANT=allreduce=int8) the float
// allreduce is of normally distributed values, which libhier quantizes in both calls the same way
// (the device kernels are the host bodies, tests/device/quant_test.cpp), so its bits must match
// too, while the int32 allreduce stays exact (HIER_QUANT quantizes float types only).
//   device_ranks --module PATH [--runtime LIB] [--bytes N[,N...]] [--iters K] [--int8] [--json FILE]
// --module: the GPU module libhier uses (the same file as HIER_GPU_MODULE), opened here for the
//   device memory and the copies; --runtime: the GPU runtime loaded first (default libcuda.so.1,
//   the simulated device's stand-in where it is preloaded).
// Rank 0 prints one line per call and size (both times: the slowest rank's best of K calls) and
// writes the JSON; the exit status is 1 when any result differs, 2 on a setup error.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "device/module.hpp"

namespace {

const hier::device::ModuleTable* g_mod = nullptr;
int g_rank = 0, g_size = 1;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "device_ranks (rank %d): %s\n", g_rank, why.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

void ok(int rc, const char* what) {
  if (rc != 0) die(std::string(what) + " returned " + std::to_string(rc));
}

// Device memory of the module; copies on the default stream, synchronized.
struct Dev {
  void* p = nullptr;
  size_t n;
  explicit Dev(size_t bytes) : n(bytes) { ok(g_mod->alloc(&p, bytes ? bytes : 1), "device alloc"); }
  ~Dev() { g_mod->release(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void put(const void* src, size_t bytes) {
    ok(g_mod->copy(p, src, bytes, nullptr), "copy to device");
    ok(g_mod->sync(nullptr), "sync");
  }
  void get(void* dst, size_t bytes) const {
    ok(g_mod->copy(dst, p, bytes, nullptr), "copy to host");
    ok(g_mod->sync(nullptr), "sync");
  }
  std::vector<char> bytes() const {
    std::vector<char> v(n);
    get(v.data(), n);
    return v;
  }
};

// The slowest rank's best time of `iters` calls of f.
double timed(int iters, const std::function<void()>& f) {
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    f();
    best = std::min(best, MPI_Wtime() - t0);
  }
  double worst = 0;
  MPI_Allreduce(&best, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

// One call: its per-rank element counts (4-byte elements), its input on this rank, and the call
// on (send, recv) buffers, device or host alike.
struct Call {
  std::string name;
  int send_elems, recv_elems;
  std::vector<char> input;  // send_elems (or recv_elems, if more) elements
  std::function<void(const void* send, void* recv)> run;
};

// Small integers (exact under any order of the sum), as floats or as ints.
template <class T>
std::vector<char> small_integers(int n) {
  std::vector<char> v(sizeof(T) * n);
  for (int i = 0; i < n; ++i) {
    const T x = static_cast<T>((i * 7 + g_rank * 13) % 29 - 14);
    std::memcpy(v.data() + sizeof(T) * i, &x, sizeof x);
  }
  return v;
}

std::vector<Call> calls(int n, bool int8) {
  const int part = n / g_size;
  std::vector<Call> c;
  // The exact allreduce in int32: HIER_QUANT quantizes float types only, so it stays exact in the
  // run that quantizes the float allreduce.
  c.push_back({"allreduce i32 exact", n, n, small_integers<int32_t>(n), [n](const void* s, void* r) {
                 MPI_Allreduce(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
               }});
  std::vector<char> normal(sizeof(float) * n);
  std::mt19937 rng(1000 + g_rank);
  std::normal_distribution<float> d(0, 3);
  for (int i = 0; i < n; ++i) {
    const float x = d(rng);
    std::memcpy(normal.data() + sizeof(float) * i, &x, sizeof x);
  }
  c.push_back({int8 ? "allreduce f32 int8" : "allreduce f32", n, n, int8 ? normal : small_integers<float>(n),
               [n](const void* s, void* r) { MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }});
  c.push_back({"reduce_scatter_block f32", part * g_size, part, small_integers<float>(n), [part](const void* s, void* r) {
                 MPI_Reduce_scatter_block(s, r, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
               }});
  c.push_back({"allgather f32", part, part * g_size, small_integers<float>(n), [part](const void* s, void* r) {
                 MPI_Allgather(s, part, MPI_FLOAT, r, part, MPI_FLOAT, MPI_COMM_WORLD);
               }});
  // bcast: in place on the receive buffer, which starts as the input (root 0's is sent).
  c.push_back({"bcast f32", n, n, small_integers<float>(n),
               [n](const void*, void* r) { MPI_Bcast(r, n, MPI_FLOAT, 0, MPI_COMM_WORLD); }});
  return c;
}

std::string size_text(size_t b) {
  char s[32];
  if (b >= (1u << 20)) std::snprintf(s, sizeof s, "%g MiB", double(b) / (1 << 20));
  else std::snprintf(s, sizeof s, "%g KiB", double(b) / 1024);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string module, runtime = "libcuda.so.1", json_path, sizes_arg = "1048576";
  int iters = 3;
  bool int8 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--module" && has) module = argv[++i];
    else if (a == "--runtime" && has) runtime = argv[++i];
    else if (a == "--bytes" && has) sizes_arg = argv[++i];
    else if (a == "--iters" && has) iters = std::atoi(argv[++i]);
    else if (a == "--json" && has) json_path = argv[++i];
    else if (a == "--int8") int8 = true;
    else {
      std::fprintf(stderr, "device_ranks: unknown argument '%s'\nusage: device_ranks --module PATH [--runtime LIB] "
                   "[--bytes N[,N...]] [--iters K] [--int8] [--json FILE]\n", a.c_str());
      return 2;
    }
  }
  // The runtime first, as a program would have it (libhier asks only a runtime already loaded).
  if (!dlopen(runtime.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    std::fprintf(stderr, "device_ranks: --runtime %s cannot be loaded (%s)\n", runtime.c_str(), dlerror());
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (module.empty()) die("--module is required");
  void* h = dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto entry = h ? reinterpret_cast<hier::device::ModuleEntry>(dlsym(h, hier::device::kModuleEntry)) : nullptr;
  g_mod = entry ? entry(hier::device::kModuleAbi) : nullptr;
  if (!g_mod) die("no GPU module from " + module + (h ? "" : std::string(": ") + dlerror()));
  if (iters < 1) iters = 1;

  std::vector<size_t> sizes;
  {
    std::stringstream ss(sizes_arg);
    std::string tok;
    while (std::getline(ss, tok, ',')) sizes.push_back(std::strtoull(tok.c_str(), nullptr, 10));
  }
  std::ostringstream json;
  json << "[";
  int mismatches = 0;
  bool first = true;
  for (size_t bytes : sizes) {
    const int n = static_cast<int>(bytes / sizeof(float)) / g_size * g_size;  // whole parts per rank
    for (const Call& c : calls(n, int8)) {
      const size_t sb = sizeof(float) * c.send_elems, rb = sizeof(float) * c.recv_elems;
      Dev send(sb), recv(rb), by_hand(rb);
      std::vector<char> hs(sb), hr(rb);
      auto reset = [&] {  // inputs: send and both receive buffers start as the input, as far as it goes
        send.put(c.input.data(), sb);
        recv.put(c.input.data(), std::min(rb, c.input.size()));
        by_hand.put(c.input.data(), std::min(rb, c.input.size()));
      };
      // Checked once on fresh inputs, then timed (the bcast's root keeps its values).
      reset();
      c.run(send.p, recv.p);
      send.get(hs.data(), sb);
      by_hand.get(hr.data(), rb);
      c.run(hs.data(), hr.data());
      by_hand.put(hr.data(), rb);
      const bool same = recv.bytes() == by_hand.bytes();
      int all_same = same ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      reset();
      const double t_dev = timed(iters, [&] { c.run(send.p, recv.p); });
      const double t_hand = timed(iters, [&] {
        send.get(hs.data(), sb);
        c.run(hs.data(), hr.data());
        by_hand.put(hr.data(), rb);
      });
      if (!all_same) ++mismatches;
      if (g_rank == 0) {
        std::printf("np %d %-24s %9s: device %9.3f ms, by hand %9.3f ms: %s\n", g_size, c.name.c_str(),
                    size_text(bytes).c_str(), t_dev * 1e3, t_hand * 1e3, all_same ? "same bits" : "DIFFERENT");
        std::fflush(stdout);
        json << (first ? "" : ",") << "\n {\"np\": " << g_size << ", \"call\": \"" << c.name << "\", \"bytes\": " << bytes
             << ", \"device_s\": " << t_dev << ", \"by_hand_s\": " << t_hand << ", \"same\": " << (all_same ? "true" : "false")
             << "}";
        first = false;
      }
    }
  }
  json << "\n]\n";
  if (g_rank == 0 && !json_path.empty()) {
    std::ofstream f(json_path);
    f << json.str();
  }
  MPI_Finalize();
  return mismatches ? 1 : 0;
}
