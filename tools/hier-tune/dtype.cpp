// hier-tune's datatype engine model: pack and unpack by libhier's engine and by the MPI, fitted
// as lines in bytes and blocks, and one message end to end between ranks 0 and 1.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "config/config.hpp"
#include "device/module.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "dtype/canon.hpp"
#include "dtype/device_pack.hpp"
#include "dtype/engine.hpp"
#include "dtype/tune.hpp"
#include "measure.hpp"

namespace hier::tune {

namespace {

using hier::dtype::CostLine;

struct Sample {
  double bytes, blocks, ns;
};

// Least squares for ns = a + b * bytes + c * blocks, relative errors (weights 1/ns^2) so that
// small messages count as much as large ones; negative coefficients are clamped to zero.
CostLine fit(const std::vector<Sample>& s) {
  double A[3][3] = {}, y[3] = {};
  for (const Sample& x : s) {
    const double f[3] = {1.0, x.bytes, x.blocks};
    const double w = 1.0 / (x.ns * x.ns);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) A[i][j] += w * f[i] * f[j];
      y[i] += w * f[i] * x.ns;
    }
  }
  // Gaussian elimination with partial pivoting.
  int p[3] = {0, 1, 2};
  double M[3][4];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) M[i][j] = A[i][j];
    M[i][3] = y[i];
  }
  for (int c = 0; c < 3; ++c) {
    int best = c;
    for (int r = c + 1; r < 3; ++r)
      if (std::fabs(M[r][c]) > std::fabs(M[best][c])) best = r;
    std::swap(M[c], M[best]);
    std::swap(p[c], p[best]);
    for (int r = 0; r < 3; ++r) {
      if (r == c || M[c][c] == 0) continue;
      const double k = M[r][c] / M[c][c];
      for (int j = c; j < 4; ++j) M[r][j] -= k * M[c][j];
    }
  }
  CostLine l;
  l.overhead_ns = std::max(0.0, M[0][0] ? M[0][3] / M[0][0] : 0.0);
  l.ns_per_byte = std::max(0.0, M[1][1] ? M[1][3] / M[1][1] : 0.0);
  l.ns_per_block = std::max(0.0, M[2][2] ? M[2][3] / M[2][2] : 0.0);
  return l;
}

struct Layout {
  MPI_Datatype t;
  int64_t bytes, blocks;
  hier::dtype::CanonRef canon;
};

Layout vector_layout(int64_t bytes, int block) {
  Layout l;
  const int n = static_cast<int>(bytes / block);
  MPI_Type_vector(n, block, 2 * block, MPI_BYTE, &l.t);
  MPI_Type_commit(&l.t);
  l.bytes = static_cast<int64_t>(n) * block;
  l.blocks = n;
  l.canon = hier::dtype::CanonRef(hier::dtype::canonicalize(l.t));
  return l;
}

// Device memory of the GPU module for the device rates (released with it).
struct DeviceBuf {
  const hier::device::ModuleTable* m;
  void* p = nullptr;
  DeviceBuf(const hier::device::ModuleTable* mod, size_t n) : m(mod) {
    if (m->alloc(&p, n) != 0) p = nullptr;
  }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  ~DeviceBuf() {
    if (p) m->release(p);
  }
};

// The device rates of the model (TuneModel::Device), where this process has a GPU runtime and
// the GPU module (HIER_GPU_MODULE) loads: the module's pack and unpack kernels between device
// buffers over the same vector layouts as the host lines, its copies device -> host, and, on a
// GPU-aware MPI, PMPI_Pack of the device layout. Returns false (the built-ins stay) without.
bool measure_device(hier::dtype::TuneModel& m, std::vector<Layout>& layouts, size_t src_bytes, size_t packed_bytes) {
  if (hier::device::runtime() == hier::device::Runtime::None) return false;
  const hier::device::ModuleTable* mod = hier::device::module(hier::config::get().gpu_module.c_str());
  if (!mod) return false;
  DeviceBuf src(mod, src_bytes), packed(mod, packed_bytes), back(mod, src_bytes);
  if (!src.p || !packed.p || !back.p) return false;
  const bool aware = hier::device::mpi_gpu_aware(hier::device::runtime(), hier::config::get().gpu_aware);
  std::vector<char> host(packed_bytes);
  void* stream = hier::device::module_stream();
  std::vector<Sample> kp, ku, cp, mp;
  bool ok = true;
  for (Layout& l : layouts) {
    hier::dtype::Canon& c = *l.canon.get();
    if (!hier::dtype::device_ready(*mod, c)) return false;
    auto run = [&](bool to_packed) {
      void* typed = to_packed ? src.p : back.p;
      const auto rc = hier::dtype::device_kernels(*mod, c, to_packed, typed, 1, static_cast<char*>(packed.p));
      ok &= rc && *rc == MPI_SUCCESS;
    };
    kp.push_back({double(l.bytes), double(l.blocks), 1e9 * seconds([&] { run(true); })});
    ku.push_back({double(l.bytes), double(l.blocks), 1e9 * seconds([&] { run(false); })});
    cp.push_back({double(l.bytes), 1.0, 1e9 * seconds([&] {
                    ok &= mod->copy(host.data(), packed.p, static_cast<size_t>(l.bytes), stream) == 0 && mod->sync(stream) == 0;
                  })});
    if (aware)
      mp.push_back({double(l.bytes), double(l.blocks), 1e9 * seconds([&] {
                      int pos = 0;
                      PMPI_Pack(src.p, 1, l.t, host.data(), int(host.size()), &pos, MPI_COMM_SELF);
                    })});
  }
  if (!ok || kp.empty()) return false;
  m.device.kernel_pack = fit(kp);
  m.device.kernel_unpack = fit(ku);
  m.device.copy = fit(cp);
  m.device.copy.ns_per_block = 0;  // one block by construction
  if (!mp.empty()) m.device.mpi_pack = fit(mp);
  m.device.measured = true;
  return true;
}

}  // namespace

// The datatype engine's model (libhier-tune/1's "p2p" object).
json measure_dtype(int rank, int size, bool quick, MPI_Comm pair) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{16 << 10, 1 << 20} : std::vector<int64_t>{16 << 10, 256 << 10, 4 << 20};
  const std::vector<int> blocks = {4, 16, 64, 256, 1024, 4096};
  std::vector<char> src(2 * (4 << 20) + 8192, 1), packed(4 << 20), back(src.size());
  std::vector<Sample> ep, eu, mp, mu;
  std::vector<Layout> e2e_cases, device_cases;
  for (int64_t bytes : sizes) {
    for (int bl : blocks) {
      Layout l = vector_layout(bytes, bl);
      if (!l.canon->ok) {
        MPI_Type_free(&l.t);
        continue;
      }
      if (rank == 0) {
        ep.push_back({double(l.bytes), double(l.blocks),
                      1e9 * seconds([&] { hier::dtype::pack(*l.canon, src.data(), 1, packed.data()); })});
        eu.push_back({double(l.bytes), double(l.blocks),
                      1e9 * seconds([&] { hier::dtype::unpack(*l.canon, packed.data(), 1, back.data()); })});
        mp.push_back({double(l.bytes), double(l.blocks), 1e9 * seconds([&] {
                        int p = 0;
                        PMPI_Pack(src.data(), 1, l.t, packed.data(), int(packed.size()), &p, MPI_COMM_SELF);
                      })});
        mu.push_back({double(l.bytes), double(l.blocks), 1e9 * seconds([&] {
                        int p = 0;
                        PMPI_Unpack(packed.data(), int(packed.size()), &p, back.data(), 1, l.t, MPI_COMM_SELF);
                      })});
      }
      if (bl == 4 || bl == 64 || bl == 1024) e2e_cases.push_back(std::move(l));
      else if (rank == 0) device_cases.push_back(std::move(l));
      else MPI_Type_free(&l.t);
    }
  }
  hier::dtype::TuneModel m = hier::dtype::builtin_model();
  m.engine_pack = fit(ep.empty() ? std::vector<Sample>{{1, 1, 1}} : ep);
  m.engine_unpack = fit(eu.empty() ? std::vector<Sample>{{1, 1, 1}} : eu);
  m.mpi_pack = fit(mp.empty() ? std::vector<Sample>{{1, 1, 1}} : mp);
  m.mpi_unpack = fit(mu.empty() ? std::vector<Sample>{{1, 1, 1}} : mu);
  // End to end between ranks 0 and 1: ping-pong of the derived type through the MPI, and of
  // the same number of contiguous bytes (what libhier sends once it has packed).
  if (size >= 2 && rank < 2) {
    const int peer = 1 - rank;
    std::vector<Sample> derived, contig;
    for (Layout& l : e2e_cases) {
      const int rounds = quick ? 20 : 60;
      auto pingpong = [&](bool bytes_only) {
        PMPI_Barrier(pair);
        auto t0 = Clock::now();
        for (int r = 0; r < rounds; ++r) {
          if ((r % 2) == rank) {
            if (bytes_only) PMPI_Send(packed.data(), int(l.bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            else PMPI_Send(src.data(), 1, l.t, peer, 0, MPI_COMM_WORLD);
          } else {
            if (bytes_only) PMPI_Recv(packed.data(), int(l.bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else PMPI_Recv(back.data(), 1, l.t, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          }
        }
        return 1e9 * std::chrono::duration<double>(Clock::now() - t0).count() / rounds;
      };
      pingpong(false);
      double d = 1e30, c = 1e30;
      for (int k = 0; k < 3; ++k) {  // best of 3, interleaved
        d = std::min(d, pingpong(false));
        c = std::min(c, pingpong(true));
      }
      derived.push_back({double(l.bytes), double(l.blocks), d});
      contig.push_back({double(l.bytes), 1.0, c});
    }
    if (rank == 0 && !derived.empty()) {
      m.mpi_p2p = fit(derived);
      m.contig_p2p = fit(contig);
      m.contig_p2p.ns_per_block = 0;  // one block by construction
    }
  }
  if (rank == 0) {
    // The device lines over every layout of the host lines (those kept for end to end too).
    std::vector<Layout> all;
    for (Layout& l : e2e_cases) all.push_back({l.t, l.bytes, l.blocks, l.canon});
    for (Layout& l : device_cases) all.push_back({l.t, l.bytes, l.blocks, l.canon});
    if (measure_device(m, all, src.size(), packed.size()))
      std::fprintf(stderr, "hier-tune: device pack rates measured with the GPU module\n");
  }
  for (Layout& l : e2e_cases) MPI_Type_free(&l.t);
  for (Layout& l : device_cases) MPI_Type_free(&l.t);
  json j = json::parse(hier::dtype::tune_to_json(m, "", ""));
  return j.at("p2p");
}

}  // namespace hier::tune
