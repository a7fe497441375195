// hier-tune: measures libhier's machine model on the user's machine and writes one JSON file
// in the format "libhier-tune/2" (docs/tune-file.md) for HIER_TUNE_FILE: the collectives
// planner's per-level parameters and the datatype engine's cost lines.
//   mpiexec -n N hier-tune [-o FILE] [--quick] [--ladder] [--level-steps]   (launched like the application)
//   hier-run mpiexec -n N hier-tune ...                                    (libhier's schedules too)
// What it measures (every figure the median of repetitions, the slowest rank's time):
//  - levels.intra: two ranks sharing memory (MPI_COMM_TYPE_SHARED): half a ping-pong of 0 bytes
//    while the others wait, and the time per round of a 4-byte allreduce on every node at once
//    (latency: the larger of the two, see busy_latency_ns), and one-way streams of large
//    messages (ns per byte) with k = 1 .. ppn members of node 0 each sending to the next one at
//    once (concurrent; at k = ppn every member sends and receives, as in a ring step; the time
//    per byte is the slope between 1/4 of the size and the size), and, with --ladder only, the
//    ladder: one message of 4 KiB .. 4 MiB alone and with every member of node 0 sending at once.
//    Off by default: on the emulated cluster its points were scheduler wake-ups, not bytes, and
//    made the model's predictions worse (docs/model.md, "The ladder: opt-in").
//  - levels.inter: the same between node 0 and node 1, with k = 1 .. ppn members of node 0 each
//    sending to one member of node 1 at once. Omitted (and said) when the job has one node.
//  - planner.step_overhead_ns: one wake-up of every member per level step, the larger busy
//    latency of the levels.
//  - compute: MPI_Reduce_local (MPI_FLOAT, MPI_SUM) and memcpy, per byte; the quantization
//    kernels (HIER_QUANT) at HIER_QUANT_BLOCK, int8 and int4: quantize, dequantize and the fused
//    dequantize + add, per byte of float32 data (compute.quant; under a second in all).
//  - levels.X.steps (only with --level-steps): the same four collectives on the level's
//    communicators, every one at once (all nodes' node communicators; all cross communicators,
//    one per node position), as a schedule's level step runs them, 16 KiB .. 4 MiB (--quick: 16
//    and 256 KiB), median of 3, with the member count (`members`); `ns` is the measured time
//    (`measured_ns`) less the level's busy latency (at least a fifth of it): a step timed alone
//    pays for waking its members, inside a schedule they run already. The cost code uses them
//    for level steps of that member count (docs/model.md, "Measured level steps"). Only when
//    every node has as many ranks.
//  - flat_measured: the MPI's own Allreduce / Allgather / Reduce_scatter_block / Bcast on the
//    whole communicator, 64 KiB .. 16 MiB, bytes counted as the planner counts them.
//  - hier_measured (when libhier is preloaded, unless --no-hier; --hier without it: an error):
//    the same four collectives at the same sizes through libhier with HIER_ALGO=hier
//    (HIER_QUANT=off, HIER_CHUNK=auto; HIER_LEVELS as the job sets it): its hierarchical
//    schedules as the planner picks them, which are the planner's hierarchical prediction on
//    this shape (docs/model.md, "Measured schedules").
//  - dtype: the datatype engine's model (the "p2p" object of libhier-tune/1): time(bytes, blocks)
//    = a + b * bytes + c * blocks fitted by least squares for libhier's engine and the MPI's own
//    PMPI_Pack/PMPI_Unpack over vectors of 4 B .. 4 KiB blocks, and one message end to end
//    between ranks 0 and 1 with the derived type through the MPI and as contiguous bytes.
#include <link.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "dtype/canon.hpp"
#include "dtype/engine.hpp"
#include "dtype/tune.hpp"
#include "quant/quant.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using hier::dtype::CostLine;

double g_batch = 0.01;
MPI_Comm g_pair = MPI_COMM_NULL;  // ranks 0 and 1

double seconds(const std::function<void()>& fn) {
  fn();
  int reps = 1;
  for (;;) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    if (std::chrono::duration<double>(Clock::now() - t0).count() >= g_batch) break;
    reps *= 2;
  }
  std::array<double, 5> v{};
  for (double& x : v) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    x = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
  }
  std::sort(v.begin(), v.end());
  return v[2];
}

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

using json = nlohmann::json;

const char* kUsage =
    "usage: mpiexec -n N hier-tune [-o FILE] [--quick] [--ladder] [--level-steps] [--help]\n"
    "       hier-run mpiexec -n N hier-tune [-o FILE] ...   (libhier's schedules too)\n"
    "  Measures libhier's machine model (levels, compute, the MPI's own collectives on the whole\n"
    "  communicator, datatype engine) and writes it as JSON\n"
    "  (format libhier-tune/2, docs/tune-file.md) to FILE\n"
    "  (default: stdout). Launch it like the application: same nodes, ranks per node, MPI.\n"
    "  --quick   fewer sizes and repetitions (seconds; for tests)\n"
    "  --ladder  also measure each level's message ladder (levels.X.ladder), which the cost\n"
    "            code then uses instead of latency + bytes x time per byte; off by default\n"
    "            (docs/model.md: on an oversubscribed machine its points are wake-ups)\n"
    "  --level-steps  also time the MPI's collectives on each level's communicators\n"
    "            (levels.X.steps), which the cost code then uses for level steps of that size;\n"
    "            off by default until validated in a run (docs/model.md, \"Measured level steps\")\n"
    "  --hier    time libhier's own hierarchical schedules of the same four collectives too\n"
    "            (hier_measured), which the planner then predicts from on this shape\n"
    "            (docs/model.md, \"Measured schedules\"); the default when libhier is preloaded\n"
    "            (hier-run), an error when it is not\n"
    "  --no-hier do not, even with libhier preloaded\n";

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median over `reps` repetitions (after one warm-up) of the slowest rank's time of fn(), every
// repetition started together (barrier) on `comm`.
double timed(MPI_Comm comm, int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    PMPI_Barrier(comm);
    const double t0 = now();
    fn();
    double dt = now() - t0, mx = 0;
    PMPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (r > 0) t.push_back(mx);
  }
  return median(t);
}

struct Shape {
  int rank = 0, size = 1, local = 0, ppn = 1, node = 0, nodes = 1;
  bool uniform = true;  // same ranks on every node, placed node by node
  MPI_Comm node_comm = MPI_COMM_NULL;
};

Shape shape() {
  Shape s;
  PMPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &s.size);
  PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &s.node_comm);
  PMPI_Comm_rank(s.node_comm, &s.local);
  PMPI_Comm_size(s.node_comm, &s.ppn);
  int leader = s.local == 0 ? 1 : 0;
  PMPI_Allreduce(&leader, &s.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  // node index: the number of leaders before this node's leader (world rank order)
  int before = 0;
  PMPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (s.rank == 0) before = 0;
  s.node = leader ? before : 0;
  PMPI_Bcast(&s.node, 1, MPI_INT, 0, s.node_comm);
  int mm[2] = {-s.ppn, s.ppn}, r[2];
  PMPI_Allreduce(mm, r, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  s.uniform = -r[0] == r[1];
  return s;
}

// World rank of member `local` of node `node`, or -1 (gathered once).
struct RankMap {
  std::vector<int> node, local;
  int find(int n, int l) const {
    for (size_t r = 0; r < node.size(); ++r)
      if (node[r] == n && local[r] == l) return static_cast<int>(r);
    return -1;
  }
};

RankMap rank_map(const Shape& s) {
  RankMap m;
  m.node.resize(s.size);
  m.local.resize(s.size);
  PMPI_Allgather(&s.node, 1, MPI_INT, m.node.data(), 1, MPI_INT, MPI_COMM_WORLD);
  PMPI_Allgather(&s.local, 1, MPI_INT, m.local.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return m;
}

// Half a round trip of 0 bytes between world ranks a and b (the others wait).
double latency_ns(int a, int b, int rank, int rounds) {
  char x = 0;
  return 1e9 * timed(MPI_COMM_WORLD, 5, [&] {
           for (int i = 0; i < rounds; ++i) {
             if (rank == a) {
               PMPI_Send(&x, 0, MPI_BYTE, b, 1, MPI_COMM_WORLD);
               PMPI_Recv(&x, 0, MPI_BYTE, b, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
             } else if (rank == b) {
               PMPI_Recv(&x, 0, MPI_BYTE, a, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
               PMPI_Send(&x, 0, MPI_BYTE, a, 1, MPI_COMM_WORLD);
             }
           }
         }) / (2.0 * rounds);
}

// Time per round of a 4-byte allreduce on `level` while every communicator of that level runs
// one at once (all nodes' node communicators, or all node positions' cross communicators):
// the conditions a schedule's level step meets. Each of its ceil(log2(members)) rounds is one
// message latency. On an oversubscribed machine (8 busy-polling ranks on 2 cores) this is the
// scheduler's time slice, tens of times the ping-pong of two ranks while the others wait.
double busy_latency_ns(MPI_Comm level, int rounds) {
  if (level == MPI_COMM_NULL || rounds <= 0) return 0;
  float x = 1, y = 0;
  const int inner = 20;
  return 1e9 * timed(MPI_COMM_WORLD, 5, [&] {
           for (int i = 0; i < inner; ++i) PMPI_Allreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, level);
         }) / (static_cast<double>(inner) * rounds);
}

int rounds_of(int members) {
  int r = 0;
  while ((1 << r) < members) ++r;
  return r;
}

// k flows at once: senders[i] sends `bytes` to receivers[i] (one direction), then a 0-byte
// acknowledgement; the median time in ns of the whole exchange (message + acknowledgement).
// Every flow's transfer is posted at once (nonblocking), so a rank may send one flow and receive
// another, as in a ring step where every member of a node sends and receives.
double flow_ns(const std::vector<int>& senders, const std::vector<int>& receivers, int rank, std::vector<char>& buf,
               int64_t bytes, int reps) {
  static std::vector<char> in;
  if (static_cast<int64_t>(in.size()) < bytes) in.resize(static_cast<size_t>(bytes));
  char ack_out = 0;
  std::vector<char> ack_in(senders.size());
  std::vector<MPI_Request> rq;
  rq.reserve(2 * senders.size());
  return 1e9 * timed(MPI_COMM_WORLD, reps, [&] {
    rq.clear();
    for (size_t i = 0; i < senders.size(); ++i)
      if (rank == receivers[i])
        PMPI_Irecv(in.data(), static_cast<int>(bytes), MPI_BYTE, senders[i], 2, MPI_COMM_WORLD, &rq.emplace_back());
    for (size_t i = 0; i < senders.size(); ++i)
      if (rank == senders[i])
        PMPI_Isend(buf.data(), static_cast<int>(bytes), MPI_BYTE, receivers[i], 2, MPI_COMM_WORLD, &rq.emplace_back());
    PMPI_Waitall(static_cast<int>(rq.size()), rq.data(), MPI_STATUSES_IGNORE);
    rq.clear();
    for (size_t i = 0; i < senders.size(); ++i) {
      if (rank == senders[i])
        PMPI_Irecv(&ack_in[i], 0, MPI_BYTE, receivers[i], 3, MPI_COMM_WORLD, &rq.emplace_back());
      if (rank == receivers[i]) PMPI_Isend(&ack_out, 0, MPI_BYTE, senders[i], 3, MPI_COMM_WORLD, &rq.emplace_back());
    }
    PMPI_Waitall(static_cast<int>(rq.size()), rq.data(), MPI_STATUSES_IGNORE);
  });
}

// The time per byte of each of the k flows: the slope between `bytes` / 4 and `bytes`, so that
// neither the latencies nor the scheduler's wake-ups are counted as bytes. (hier-tune 2 took
// (time - 2 latencies) / bytes, at least half the time: on our oversubscribed cluster the
// wake-ups were most of a 4 MiB message's time inside a node, and that floor made the node's
// copies 10x slower per byte than the MPI's own contiguous messages measured (dtype.contig_p2p,
// docs/model.md).) A slope that noise makes negative falls back to the old figure.
double flow_ns_per_byte(const std::vector<int>& senders, const std::vector<int>& receivers, int rank,
                        std::vector<char>& buf, int64_t bytes, int reps, double lat_ns) {
  const double big = flow_ns(senders, receivers, rank, buf, bytes, reps);
  const double small = flow_ns(senders, receivers, rank, buf, bytes / 4, reps);
  const double slope = (big - small) / (0.75 * static_cast<double>(bytes));
  if (slope > 0) return slope;
  return std::max(big - 2 * lat_ns, 0.5 * big) / static_cast<double>(bytes);
}

// The ladder (docs/tune-file.md, levels.*.ladder): one message of each size alone and one per
// flow of `max_flows` at once, latency included (the 0-byte acknowledgement's one way, half the
// 0-byte exchange, taken off). The cost code interpolates between the sizes: a protocol switch
// (eager to rendezvous: one more round trip above the MPI's eager limit) shows as a step that one
// latency + bytes / bandwidth line cannot draw.
json measure_ladder(const std::vector<int>& snd, const std::vector<int>& rcv, int rank, std::vector<char>& buf,
                    bool quick) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{4 << 10, 64 << 10, 1 << 20}
                                           : std::vector<int64_t>{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  const int reps = quick ? 3 : 5;
  const std::vector<int> s1(snd.begin(), snd.begin() + 1), r1(rcv.begin(), rcv.begin() + 1);
  const double ack1 = 0.5 * flow_ns(s1, r1, rank, buf, 0, reps), ack_all = 0.5 * flow_ns(snd, rcv, rank, buf, 0, reps);
  json pts = json::array();
  for (int64_t b : sizes) {
    if (b > static_cast<int64_t>(buf.size())) break;
    const double one = std::max(flow_ns(s1, r1, rank, buf, b, reps) - ack1, 0.0);
    const double all = snd.size() > 1 ? std::max(flow_ns(snd, rcv, rank, buf, b, reps) - ack_all, 0.0) : one;
    pts.push_back({{"bytes", b}, {"ns", one}, {"ns_all", all}});
  }
  return {{"flows", static_cast<int>(snd.size())}, {"points", pts}};
}

// One level: latency of pair (a0, b0), and k = 1..max_flows flows, flow i from node_a's member
// sa(i) to node_b's member sb(i).
// latency_ns is the larger of the ping-pong and the busy latency (busy_latency_ns on `busy`, a
// communicator of `busy_members` ranks of this level); both are kept in the file for reference.
json measure_level(const Shape& s, const RankMap& m, int na, int nb, const std::function<int(int)>& la,
                   const std::function<int(int)>& lb, int max_flows, bool quick, bool ladder, std::vector<char>& buf,
                   MPI_Comm busy, int busy_members) {
  const int a0 = m.find(na, la(0)), b0 = m.find(nb, lb(0));
  const double pingpong = latency_ns(a0, b0, s.rank, quick ? 20 : 100);
  const double busy_ns = busy_latency_ns(busy, rounds_of(busy_members));
  const double lat = std::max(pingpong, busy_ns);
  const int64_t bytes = quick ? (1 << 20) : (4 << 20);
  const int reps = quick ? 3 : 5;
  json conc = json::array();
  double one = 0;
  std::vector<int> snd, rcv;
  for (int k = 1; k <= max_flows; ++k) {
    snd.push_back(m.find(na, la(k - 1)));
    rcv.push_back(m.find(nb, lb(k - 1)));
    const double x = flow_ns_per_byte(snd, rcv, s.rank, buf, bytes, reps, lat);
    if (k == 1) one = x;
    conc.push_back({{"flows", k}, {"ns_per_byte", x}});
  }
  json out = {{"latency_ns", lat}, {"pingpong_latency_ns", pingpong}, {"busy_latency_ns", busy_ns},
              {"ns_per_byte", one}, {"concurrent", conc}};
  if (ladder) out["ladder"] = measure_ladder(snd, rcv, s.rank, buf, quick);
  return out;
}

// Four collectives on MPI_COMM_WORLD, 64 KiB .. 16 MiB, bytes as the planner counts them:
// the MPI's own (PMPI_*: flat_measured), or through libhier (MPI_*: hier_measured, with
// libhier preloaded and HIER_ALGO=hier, so that its hierarchical schedules run).
json measure_colls(const Shape& s, bool quick, bool through_libhier) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{64 << 10, 1 << 20}
                                           : std::vector<int64_t>{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  const int reps = quick ? 3 : 5;
  json out = json::object();
  const int64_t cap = sizes.back();
  std::vector<float> a(cap / 4 + s.size, 1.0f), b(cap / 4 + s.size, 0.0f);
  const bool lib = through_libhier;
  auto run = [&](const char* name, const std::function<void(int64_t)>& call) {
    json pts = json::array();
    for (int64_t n : sizes) {
      const double t = timed(MPI_COMM_WORLD, reps, [&] { call(n); });
      pts.push_back({{"bytes", n}, {"ns", 1e9 * t}});
    }
    out[name] = pts;
  };
  run("allreduce", [&](int64_t n) {
    const int c = static_cast<int>(n / 4);
    lib ? MPI_Allreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
        : PMPI_Allreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  run("allgather", [&](int64_t n) {  // n: the whole output
    const int c = static_cast<int>(n / 4 / s.size);
    lib ? MPI_Allgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, MPI_COMM_WORLD)
        : PMPI_Allgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, MPI_COMM_WORLD);
  });
  run("reduce_scatter_block", [&](int64_t n) {  // n: the whole input
    const int c = static_cast<int>(n / 4 / s.size);
    lib ? MPI_Reduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
        : PMPI_Reduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  run("bcast", [&](int64_t n) {
    const int c = static_cast<int>(n / 4);
    lib ? MPI_Bcast(a.data(), c, MPI_FLOAT, 0, MPI_COMM_WORLD) : PMPI_Bcast(a.data(), c, MPI_FLOAT, 0, MPI_COMM_WORLD);
  });
  return out;
}

// Whether libhier.so is loaded in this process (preloaded by hier-run or LD_PRELOAD).
bool libhier_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
        name = name ? name + 1 : info->dlpi_name;
        if (name && std::strncmp(name, "libhier.so", 10) == 0) *static_cast<bool*>(data) = true;
        return 0;
      },
      &found);
  return found;
}

// Measured level steps (levels.X.steps, docs/model.md "Measured level steps"): the MPI's own
// Allreduce (float sum) / Allgather / Reduce_scatter_block / Bcast on `level` (this rank's node
// communicator or cross communicator), every communicator of the level running it at once, as a
// schedule's level step runs; bytes as the planner counts them (the whole vector, output or
// input: the bytes actually moved, a multiple of 4 x members), the slowest rank's time, median
// of `reps`, less `start_ns` (the level's busy latency; at least a fifth of the time is kept):
// timed alone, a step includes waking every member, which inside a schedule the step before has
// done (offline, bench/model/results/levelsteps-offline.md: the raw times over-predicted small
// and mid-size schedules by about one wake-up per step). Every rank calls it (each on its own
// communicator of the level).
// Cost: 4 collectives x sizes x (reps + 1) calls; 5 x 4 on the emulated cluster at ~10-200 ms a
// call: 2-16 s per level.
json measure_steps(MPI_Comm level, int members, bool quick, double start_ns) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{16 << 10, 256 << 10}
                                           : std::vector<int64_t>{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  const int reps = 3;
  json out = {{"members", members}};
  const int64_t cap = sizes.back();
  std::vector<float> a(cap / 4 + members, 1.0f), b(cap / 4 + members, 0.0f);
  // call(n) runs the collective for (about) n bytes and returns the bytes it counts.
  auto run = [&](const char* name, const std::function<int64_t(int64_t, bool)>& call) {
    json pts = json::array();
    for (int64_t n : sizes) {
      const double t = 1e9 * timed(MPI_COMM_WORLD, reps, [&] { call(n, true); });
      pts.push_back({{"bytes", call(n, false)}, {"ns", std::max(t - start_ns, 0.2 * t)}, {"measured_ns", t}});
    }
    out[name] = pts;
  };
  run("allreduce", [&](int64_t n, bool go) {
    if (go) PMPI_Allreduce(a.data(), b.data(), static_cast<int>(n / 4), MPI_FLOAT, MPI_SUM, level);
    return n / 4 * 4;
  });
  run("allgather", [&](int64_t n, bool go) {  // the whole output
    const int per = static_cast<int>(n / 4 / members);
    if (go) PMPI_Allgather(a.data(), per, MPI_FLOAT, b.data(), per, MPI_FLOAT, level);
    return static_cast<int64_t>(per) * 4 * members;
  });
  run("reduce_scatter_block", [&](int64_t n, bool go) {  // the whole input
    const int per = static_cast<int>(n / 4 / members);
    if (go) PMPI_Reduce_scatter_block(a.data(), b.data(), per, MPI_FLOAT, MPI_SUM, level);
    return static_cast<int64_t>(per) * 4 * members;
  });
  run("bcast", [&](int64_t n, bool go) {
    if (go) PMPI_Bcast(a.data(), static_cast<int>(n / 4), MPI_FLOAT, 0, level);
    return n / 4 * 4;
  });
  return out;
}

// The host quantization kernels (src/quant, what the quantized collectives run) on `bytes` of
// float32 in blocks of `block` values, for int8 and int4: quantize, dequantize and the fused
// dequantize + add, each per byte of float data (model::QuantRates). Float32 only: the model
// counts a float64 value as its 8 bytes at the same rates.
json measure_quant(int64_t bytes, int64_t block) {
  const int64_t n = bytes / 4;
  // Gradient-like data: signs and magnitudes vary inside a block and from block to block (the
  // kernels are branch-free, but a constant block would hide nothing either way).
  std::vector<float> x(static_cast<size_t>(n)), out(static_cast<size_t>(n)), acc(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * (1 + (i / block) % 13));
  std::vector<unsigned char> rec(static_cast<size_t>(hier::quant::quantized_bytes(n, block, 8)));
  json per = json::object();
  for (int bits : {8, 4}) {
    const double q = seconds([&] {
      hier::quant::quantize(x.data(), n, block, bits, rec.data());
      asm volatile("" ::"r"(rec.data()) : "memory");
    });
    const double dq = seconds([&] {
      hier::quant::dequantize(rec.data(), n, block, bits, out.data());
      asm volatile("" ::"r"(out.data()) : "memory");
    });
    // (the accumulator grows by one value per call: finite for any number of repetitions)
    const double dqa = seconds([&] {
      hier::quant::dequantize_add(rec.data(), n, block, bits, acc.data());
      asm volatile("" ::"r"(acc.data()) : "memory");
    });
    const double b = static_cast<double>(bytes);
    per[bits == 8 ? "int8" : "int4"] = {{"quantize_ns_per_byte", 1e9 * q / b},
                                        {"dequantize_ns_per_byte", 1e9 * dq / b},
                                        {"dequantize_add_ns_per_byte", 1e9 * dqa / b}};
  }
  json j = {{"block", block}, {"bytes", bytes}};
  j.update(per);
  return j;
}

json measure_compute(bool quick, int64_t quant_block) {
  const int64_t n = quick ? (1 << 20) : (4 << 20);
  std::vector<float> x(n / 4, 1.0f), y(n / 4, 2.0f);
  std::vector<char> c(n, 1), d(n);
  const double red = seconds([&] { PMPI_Reduce_local(x.data(), y.data(), static_cast<int>(n / 4), MPI_FLOAT, MPI_SUM); });
  const double cp = seconds([&] {
    std::memcpy(d.data(), c.data(), static_cast<size_t>(n));
    asm volatile("" ::"r"(d.data()) : "memory");
  });
  json j = {{"reduce_ns_per_byte", 1e9 * red / n}, {"copy_ns_per_byte", 1e9 * cp / n}};
  j["quant"] = measure_quant(n, quant_block);
  // The one-figure keys of older files too (int8's quantize and dequantize + add, which such a
  // reader applies to both formats and both dequantizations), for readers without compute.quant.
  j["quantize_ns_per_byte"] = j["quant"]["int8"]["quantize_ns_per_byte"];
  j["dequantize_ns_per_byte"] = j["quant"]["int8"]["dequantize_add_ns_per_byte"];
  return j;
}

// The datatype engine's model (libhier-tune/1's "p2p" object).
json measure_dtype(int rank, int size, bool quick) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{16 << 10, 1 << 20} : std::vector<int64_t>{16 << 10, 256 << 10, 4 << 20};
  const std::vector<int> blocks = {4, 16, 64, 256, 1024, 4096};
  std::vector<char> src(2 * (4 << 20) + 8192, 1), packed(4 << 20), back(src.size());
  std::vector<Sample> ep, eu, mp, mu;
  std::vector<Layout> e2e_cases;
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
        PMPI_Barrier(g_pair);
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
  for (Layout& l : e2e_cases) MPI_Type_free(&l.t);
  json j = json::parse(hier::dtype::tune_to_json(m, "", ""));
  return j.at("p2p");
}

std::string iso_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  // libhier's own schedules (hier_measured) are timed when libhier is preloaded, unless
  // --no-hier; --hier insists (an error without libhier). The preloaded libhier reads its
  // configuration in MPI_Init, so it must see these first: its hierarchical schedules, exact,
  // whatever the job's environment says.
  bool want_hier = false, no_hier = false;
  for (int i = 1; i < argc; ++i) {
    want_hier = want_hier || std::strcmp(argv[i], "--hier") == 0;
    no_hier = no_hier || std::strcmp(argv[i], "--no-hier") == 0;
  }
  const bool preloaded = libhier_loaded();
  const bool hier = !no_hier && (want_hier || preloaded);
  if (hier && preloaded) {
    setenv("HIER_ALGO", "hier", 1);
    setenv("HIER_QUANT", "off", 1);
    setenv("HIER_CHUNK", "auto", 1);  // the chunks the planner chooses (plan.cpp uses the points only then)
    setenv("HIER_DISABLE", "0", 1);
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string out;
  bool quick = false, ladder = false, level_steps = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--ladder") {
      ladder = true;
    } else if (a == "--hier" || a == "--no-hier") {
      // (read above, before MPI_Init)
    } else if (a == "--level-steps") {
      level_steps = true;
    } else if (a == "--help" || a == "-h") {
      if (rank == 0) std::fputs(kUsage, stdout);
      MPI_Finalize();
      return 0;
    } else {
      if (rank == 0)
        std::fprintf(stderr, "hier-tune: %s '%s'\n%s", a == "-o" ? "missing file name after" : "unknown argument",
                     a.c_str(), kUsage);
      MPI_Finalize();
      return 2;
    }
  }
  if (want_hier && no_hier) {
    if (rank == 0) std::fprintf(stderr, "hier-tune: --hier and --no-hier contradict each other\n%s", kUsage);
    MPI_Finalize();
    return 2;
  }
  if (hier && !preloaded) {
    if (rank == 0)
      std::fprintf(stderr,
                   "hier-tune: --hier times libhier's schedules, but libhier.so is not loaded: launch as "
                   "hier-run mpiexec -n N hier-tune (or with LD_PRELOAD=libhier.so)\n");
    MPI_Finalize();
    return 2;
  }
  // The quantization block the kernels are timed at: HIER_QUANT_BLOCK as libhier reads it (an
  // invalid value: libhier's one line, and its default, which libhier would run with too).
  for (const std::string& e : hier::config::process_config().errors)
    if (e.rfind("HIER_QUANT_BLOCK=", 0) == 0 && rank == 0) std::fprintf(stderr, "hier-tune: warning: %s\n", e.c_str());
  const int64_t quant_block = hier::config::get().quant_block;
  // Check the output file first, so that a bad path costs no measurement.
  int writable = 1;
  if (rank == 0 && !out.empty()) {
    // (appending nothing, and removing it again if it was not there: the file appears only
    // once complete, so that a launcher may wait for it)
    const bool existed = access(out.c_str(), F_OK) == 0;
    FILE* f = std::fopen(out.c_str(), "a");
    if (!f) {
      std::fprintf(stderr, "hier-tune: cannot write %s: %s\n", out.c_str(), std::strerror(errno));
      writable = 0;
    } else {
      std::fclose(f);
      if (!existed) std::remove(out.c_str());
    }
  }
  PMPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!writable) {
    MPI_Finalize();
    return 1;
  }
  const double t_start = now();
  g_batch = quick ? 0.002 : 0.01;
  PMPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &g_pair);
  const Shape s = shape();
  const RankMap map = rank_map(s);
  if (!s.uniform && rank == 0)
    std::fprintf(stderr,
                 "hier-tune: warning: nodes have different numbers of ranks; the file states %d per node "
                 "(no levels.X.steps)\n",
                 s.ppn);

  json levels = json::object();
  std::vector<char> buf((quick ? 1 : 4) << 20, 1);
  // intra: node 0, members i -> i + 1 (mod ppn), k = 1 .. ppn flows: with k = ppn every member
  // sends and receives, as in a ring step of a level collective (the model's flows of a step
  // inside a node are the members running it).
  if (s.ppn >= 2) {
    const int ppn = s.ppn;
    levels["intra"] = measure_level(s, map, 0, 0, [](int i) { return i; }, [ppn](int i) { return (i + 1) % ppn; },
                                    ppn, quick, ladder, buf, s.node_comm, s.ppn);
    // (every node the same size: the communicators of the level are alike)
    if (s.uniform && level_steps)
      levels["intra"]["steps"] = measure_steps(s.node_comm, s.ppn, quick, levels["intra"]["busy_latency_ns"].get<double>());
  } else if (rank == 0) {
    std::fprintf(stderr, "hier-tune: one rank per node: levels.intra not measured\n");
  }
  // inter: node 0 member i -> node 1 member i, i < k, k = 1 .. ppn
  if (s.nodes >= 2) {
    int ppn1 = 0;
    for (size_t r = 0; r < map.node.size(); ++r) ppn1 += map.node[r] == 1;
    MPI_Comm cross = MPI_COMM_NULL;  // the ranks of one node position, one per node
    PMPI_Comm_split(MPI_COMM_WORLD, s.local, s.rank, &cross);
    levels["inter"] = measure_level(s, map, 0, 1, [](int i) { return i; }, [](int i) { return i; },
                                    std::min(s.ppn, ppn1), quick, ladder, buf, cross, s.nodes);
    if (s.uniform && level_steps)
      levels["inter"]["steps"] = measure_steps(cross, s.nodes, quick, levels["inter"]["busy_latency_ns"].get<double>());
    PMPI_Comm_free(&cross);
  } else if (rank == 0) {
    std::fprintf(stderr, "hier-tune: one node: only levels.intra is measured (no levels.inter)\n");
  }
  // A level step of a schedule starts when its last member is scheduled: one more wake-up of
  // every member, which is the busy latency of the slower level (validated on the emulated
  // cluster: the hierarchical schedules' small-message times exceeded the predictions by about
  // one busy latency per level step; bench/RESULTS.md, "Model validation").
  double step_overhead = 0;
  for (const auto& [name, lv] : levels.items()) step_overhead = std::max(step_overhead, lv.value("busy_latency_ns", 0.0));
  const json compute = measure_compute(quick, quant_block);  // every rank measures; rank 0's figures are kept
  const json flat = measure_colls(s, quick, false);
  json hier_pts;
  if (hier) {
    if (s.nodes < 2 && rank == 0)
      std::fprintf(stderr,
                   "hier-tune: one node: libhier's schedules measured on the levels HIER_LEVELS gives (the planner "
                   "uses hier_measured only on a shape across nodes)\n");
    hier_pts = measure_colls(s, quick, true);
  }
  const json dtype = measure_dtype(rank, size, quick);

  if (rank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string l(lib, len);
    l = l.substr(0, l.find_first_of("\n,"));
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t')) l.pop_back();
    for (char& c : l)
      if (c == '\t') c = ' ';
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
#if defined(OMPI_MAJOR_VERSION)
    const char* family = "openmpi";
#else
    const char* family = "mpich";
#endif
    json j = {{"format", "libhier-tune/2"},
              {"machine",
               {{"host", host},
                {"mpi_family", family},
                {"mpi_library", l},
                {"nodes", s.nodes},
                {"ranks_per_node", s.ppn},
                {"measured", iso_now()},
                {"tool", "hier-tune 5"}}},
              {"levels", levels},
              {"compute", compute},
              {"flat_measured", flat},
              {"dtype", dtype}};
    if (hier) j["hier_measured"] = hier_pts;
    if (step_overhead > 0) j["planner"] = {{"step_overhead_ns", step_overhead}};  // else the built-in's
    const std::string text = j.dump(2) + "\n";
    if (out.empty()) {
      std::fputs(text.c_str(), stdout);
    } else {
      FILE* f = std::fopen(out.c_str(), "w");
      if (!f || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0) {
        std::fprintf(stderr, "hier-tune: cannot write %s\n", out.c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::fprintf(stderr, "hier-tune: wrote %s in %.0f s (%d nodes x %d ranks; use HIER_TUNE_FILE=%s)\n", out.c_str(),
                   now() - t_start, s.nodes, s.ppn, out.c_str());
    }
  }
  if (g_pair != MPI_COMM_NULL) PMPI_Comm_free(&g_pair);
  PMPI_Comm_free(const_cast<MPI_Comm*>(&s.node_comm));
  MPI_Finalize();
  return 0;
}
