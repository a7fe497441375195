// hier-tune's levels: latencies, streams and ladders between two ranks of a node (levels.intra)
// and of two nodes (levels.inter), and the MPI's collectives on each level's communicators
// (levels.X.steps).
#include <algorithm>

#include "measure.hpp"

namespace hier::tune {

namespace {

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
void measure_ladder(const std::vector<int>& snd, const std::vector<int>& rcv, int rank, std::vector<char>& buf,
                    bool quick, model::LevelParams& out) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{4 << 10, 64 << 10, 1 << 20}
                                           : std::vector<int64_t>{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  const int reps = quick ? 3 : 5;
  const std::vector<int> s1(snd.begin(), snd.begin() + 1), r1(rcv.begin(), rcv.begin() + 1);
  const double ack1 = 0.5 * flow_ns(s1, r1, rank, buf, 0, reps), ack_all = 0.5 * flow_ns(snd, rcv, rank, buf, 0, reps);
  out.ladder.clear();
  for (int64_t b : sizes) {
    if (b > static_cast<int64_t>(buf.size())) break;
    const double one = std::max(flow_ns(s1, r1, rank, buf, b, reps) - ack1, 0.0);
    const double all = snd.size() > 1 ? std::max(flow_ns(snd, rcv, rank, buf, b, reps) - ack_all, 0.0) : one;
    out.ladder.push_back({static_cast<double>(b), one, all});
  }
  out.ladder_flows = static_cast<int>(snd.size());
}

}  // namespace

model::LevelParams measure_level(const Shape& s, const RankMap& m, int na, int nb, const std::function<int(int)>& la,
                                 const std::function<int(int)>& lb, int max_flows, bool quick, bool ladder,
                                 std::vector<char>& buf, MPI_Comm busy, int busy_members, model::LevelNotes& notes) {
  const int a0 = m.find(na, la(0)), b0 = m.find(nb, lb(0));
  const double pingpong = latency_ns(a0, b0, s.rank, quick ? 20 : 100);
  const double busy_ns = busy_latency_ns(busy, rounds_of(busy_members));
  const double lat = std::max(pingpong, busy_ns);
  const int64_t bytes = quick ? (1 << 20) : (4 << 20);
  const int reps = quick ? 3 : 5;
  model::LevelParams out;
  out.latency_ns = lat;
  notes.pingpong_latency_ns = pingpong;
  notes.busy_latency_ns = busy_ns;
  std::vector<int> snd, rcv;
  for (int k = 1; k <= max_flows; ++k) {
    snd.push_back(m.find(na, la(k - 1)));
    rcv.push_back(m.find(nb, lb(k - 1)));
    const double x = flow_ns_per_byte(snd, rcv, s.rank, buf, bytes, reps, lat);
    if (k == 1) out.ns_per_byte = x;
    out.concurrent.push_back({k, x});
  }
  if (ladder) measure_ladder(snd, rcv, s.rank, buf, quick, out);
  return out;
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
void measure_steps(MPI_Comm level, int members, bool quick, double start_ns, model::LevelParams& out) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{16 << 10, 256 << 10}
                                           : std::vector<int64_t>{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  const int reps = 3;
  out.step_members = members;
  const int64_t cap = sizes.back();
  std::vector<float> a(cap / 4 + members, 1.0f), b(cap / 4 + members, 0.0f);
  // call(n) runs the collective for (about) n bytes and returns the bytes it counts.
  auto run = [&](config::Coll c, const std::function<int64_t(int64_t, bool)>& call) {
    std::vector<model::Point>& pts = out.steps[static_cast<size_t>(c)];
    pts.clear();
    for (int64_t n : sizes) {
      const double t = 1e9 * timed(MPI_COMM_WORLD, reps, [&] { call(n, true); });
      pts.push_back({static_cast<double>(call(n, false)), std::max(t - start_ns, 0.2 * t), t});
    }
  };
  run(config::Coll::Allreduce, [&](int64_t n, bool go) {
    if (go) PMPI_Allreduce(a.data(), b.data(), static_cast<int>(n / 4), MPI_FLOAT, MPI_SUM, level);
    return n / 4 * 4;
  });
  run(config::Coll::Allgather, [&](int64_t n, bool go) {  // the whole output
    const int per = static_cast<int>(n / 4 / members);
    if (go) PMPI_Allgather(a.data(), per, MPI_FLOAT, b.data(), per, MPI_FLOAT, level);
    return static_cast<int64_t>(per) * 4 * members;
  });
  run(config::Coll::ReduceScatterBlock, [&](int64_t n, bool go) {  // the whole input
    const int per = static_cast<int>(n / 4 / members);
    if (go) PMPI_Reduce_scatter_block(a.data(), b.data(), per, MPI_FLOAT, MPI_SUM, level);
    return static_cast<int64_t>(per) * 4 * members;
  });
  run(config::Coll::Bcast, [&](int64_t n, bool go) {
    if (go) PMPI_Bcast(a.data(), static_cast<int>(n / 4), MPI_FLOAT, 0, level);
    return n / 4 * 4;
  });
}

}  // namespace hier::tune
