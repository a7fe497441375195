// hier-bench: an OSU-style driver for the collectives libhier rewrites. Run it under mpiexec,
// with or without libhier preloaded; it only calls MPI_* (so libhier sees every timed call) and
// uses PMPI_* for its own bookkeeping (so the report counts only the benchmarked calls).
//
//   hier-bench [--colls KEY,...]  (default: every collective of src/config/collectives.def)
//              [--min BYTES] [--max BYTES] [--step F] [--iters N] [--warmup N] [--max-iters-bytes B]
//              [--csv FILE] [--json FILE] [--label TEXT]
//
// The collectives are the table's keys (src/config/collectives.def): hier-bench refuses to start
// where a row has no case here, so a new collective is benchmarked from its first build.
// Size semantics (per rank, float32 elements): allreduce / reduce / bcast: the whole buffer;
// reduce_scatter(_block): the input buffer (each rank keeps size/P); allgather(v) / alltoall /
// gather / scatter: the block per rank (rooted ones at rank 0). Per size: warm-up, then iterations; each iteration's time is the maximum
// over ranks; the table shows the median and the minimum of those. Every result is checked
// against the exact expected value (inputs are small integers, so float sums are exact).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

// The table's keys, in its order.
const std::vector<std::string> kTableKeys = {
#define HIER_COLL(name, key, ...) #key,
#include "config/collectives.def"
};

struct Options {
  std::vector<std::string> colls = kTableKeys;
  size_t min_bytes = 8, max_bytes = size_t(1) << 24, step = 2;
  int iters = 20, warmup = 3;
  size_t iters_scale_bytes = size_t(1) << 20;  // above this size, iterations shrink to keep runs short
  std::string csv, json, label = "run";
};

struct Row {
  std::string coll;
  size_t bytes;
  double median_us, min_us;
  int iters;
  bool valid;
};

int g_rank = 0, g_size = 1;

// Deterministic small integers: sums over ranks stay exact in float32.
float value(int rank, size_t i) { return static_cast<float>((rank * 7 + static_cast<int>(i % 13)) % 17); }

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t p = s.find(',', start);
    if (p == std::string::npos) p = s.size();
    if (p > start) out.push_back(s.substr(start, p - start));
    start = p + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { if (g_rank == 0) std::fprintf(stderr, "hier-bench: %s needs a value\n", a.c_str()); PMPI_Abort(MPI_COMM_WORLD, 2); }
      return argv[++i];
    };
    if (a == "--colls") o.colls = split(next());
    else if (a == "--min") o.min_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--max") o.max_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--step") o.step = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--iters") o.iters = std::atoi(next().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(next().c_str());
    else if (a == "--max-iters-bytes") o.iters_scale_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--csv") o.csv = next();
    else if (a == "--json") o.json = next();
    else if (a == "--label") o.label = next();
    else {
      if (g_rank == 0) std::fprintf(stderr, "hier-bench: unknown option %s (hier-bench --help lists them)\n", a.c_str());
      PMPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (o.min_bytes < 4) o.min_bytes = 4;
  if (o.step < 2) o.step = 2;
  return o;
}

// Runs one collective once; returns whether the result is exactly right.
struct Case;
using Runner = std::function<void(Case&)>;
const std::map<std::string, Runner>& runners();

struct Case {
  std::string coll;
  size_t n;  // float elements (see size semantics above)
  std::vector<float> send, recv;
  std::vector<int> counts, displs;  // the v-variants: n per rank

  Case(const std::string& c, size_t bytes) : coll(c), n(std::max<size_t>(1, bytes / sizeof(float))) {
    size_t send_n = n, recv_n = n;
    if (coll == "allgather" || coll == "allgatherv" || coll == "gather") recv_n = n * g_size;
    if (coll == "scatter") send_n = n * g_size;
    if (coll == "alltoall") send_n = recv_n = n * g_size;
    if (coll == "reduce_scatter_block" || coll == "reduce_scatter") {
      n = std::max<size_t>(g_size, n - n % g_size);
      send_n = n;
      recv_n = n / g_size;
    }
    send.resize(send_n);
    recv.resize(recv_n);
    for (size_t i = 0; i < send_n; ++i) send[i] = value(g_rank, i);
    const int each = static_cast<int>(coll == "reduce_scatter" ? n / g_size : n);
    for (int r = 0; r < g_size; ++r) counts.push_back(each), displs.push_back(r * each);
  }

  void run() { runners().at(coll)(*this); }

  bool check() const {
    auto sum_at = [&](size_t i) {
      float s = 0;
      for (int r = 0; r < g_size; ++r) s += value(r, i);
      return s;
    };
    if (coll == "allreduce" || (coll == "reduce" && g_rank == 0)) {
      for (size_t i = 0; i < n; ++i) if (recv[i] != sum_at(i)) return false;
    } else if (coll == "bcast" && g_rank != 0) {
      for (size_t i = 0; i < n; ++i) if (recv[i] != value(0, i)) return false;
    } else if (coll == "allgather" || coll == "allgatherv" || (coll == "gather" && g_rank == 0)) {
      for (int r = 0; r < g_size; ++r)
        for (size_t i = 0; i < n; ++i) if (recv[r * n + i] != value(r, i)) return false;
    } else if (coll == "scatter") {
      for (size_t i = 0; i < n; ++i) if (recv[i] != value(0, g_rank * n + i)) return false;
    } else if (coll == "alltoall") {
      for (int r = 0; r < g_size; ++r)
        for (size_t i = 0; i < n; ++i) if (recv[r * n + i] != value(r, g_rank * n + i)) return false;
    } else if (coll == "reduce_scatter_block" || coll == "reduce_scatter") {
      const size_t k = n / g_size;
      for (size_t i = 0; i < k; ++i) if (recv[i] != sum_at(g_rank * k + i)) return false;
    }
    return true;
  }
};

const std::map<std::string, Runner>& runners() {
  static const std::map<std::string, Runner> m = {
      {"allreduce", [](Case& c) { MPI_Allreduce(c.send.data(), c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"reduce", [](Case& c) { MPI_Reduce(c.send.data(), c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); }},
      {"bcast", [](Case& c) { MPI_Bcast(g_rank == 0 ? c.send.data() : c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, 0, MPI_COMM_WORLD); }},
      {"allgather", [](Case& c) { MPI_Allgather(c.send.data(), static_cast<int>(c.n), MPI_FLOAT, c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, MPI_COMM_WORLD); }},
      {"allgatherv", [](Case& c) { MPI_Allgatherv(c.send.data(), static_cast<int>(c.n), MPI_FLOAT, c.recv.data(), c.counts.data(), c.displs.data(), MPI_FLOAT, MPI_COMM_WORLD); }},
      {"alltoall", [](Case& c) { MPI_Alltoall(c.send.data(), static_cast<int>(c.n), MPI_FLOAT, c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, MPI_COMM_WORLD); }},
      {"reduce_scatter_block", [](Case& c) { MPI_Reduce_scatter_block(c.send.data(), c.recv.data(), static_cast<int>(c.n) / g_size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"reduce_scatter", [](Case& c) { MPI_Reduce_scatter(c.send.data(), c.recv.data(), c.counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"gather", [](Case& c) { MPI_Gather(c.send.data(), static_cast<int>(c.n), MPI_FLOAT, c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, 0, MPI_COMM_WORLD); }},
      {"scatter", [](Case& c) { MPI_Scatter(c.send.data(), static_cast<int>(c.n), MPI_FLOAT, c.recv.data(), static_cast<int>(c.n), MPI_FLOAT, 0, MPI_COMM_WORLD); }},
      {"barrier", [](Case&) { MPI_Barrier(MPI_COMM_WORLD); }},
  };
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

Row measure(const Options& o, const std::string& coll, size_t bytes) {
  Case c(coll, bytes);
  int iters = o.iters;
  if (bytes > o.iters_scale_bytes) iters = std::max(3, static_cast<int>(o.iters * double(o.iters_scale_bytes) / bytes));
  for (int w = 0; w < o.warmup; ++w) c.run();
  std::vector<double> times;
  for (int it = 0; it < iters; ++it) {
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    c.run();
    double dt = MPI_Wtime() - t0, dmax = 0;
    PMPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(dmax * 1e6);
  }
  int ok = c.check(), all_ok = 0;
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return {coll, coll == "barrier" ? 0 : bytes, median(times), *std::min_element(times.begin(), times.end()), iters, all_ok != 0};
}

}  // namespace

const char* kUsage =
    "usage: mpiexec -n N hier-bench [--colls KEY,...] [--min BYTES] [--max BYTES] [--step F]\n"
    "                               [--iters N] [--warmup N] [--max-iters-bytes B]\n"
    "                               [--csv FILE] [--json FILE] [--label TEXT]\n"
    "  Times the collectives libhier rewrites (default: every row of src/config/collectives.def),\n"
    "  with or without libhier preloaded (hier-run mpiexec ... hier-bench). Sizes are bytes per rank\n"
    "  (default 8 to 16777216, times --step 2); each iteration's time is the maximum over ranks, and\n"
    "  the table shows their median and minimum. Above --max-iters-bytes (1048576) the iterations\n"
    "  shrink. Every result is checked against the exact expected value.\n";

int main(int argc, char** argv) {
  // --help before MPI_Init: it needs no launcher and no MPI.
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  MPI_Init(&argc, &argv);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const Options o = parse(argc, argv);
  // Every row of the table has a case here, and every name asked for is one of them.
  for (const std::string& k : kTableKeys)
    if (!runners().count(k)) {
      if (g_rank == 0) std::fprintf(stderr, "hier-bench: collectives.def's %s has no case in hier_bench.cpp\n", k.c_str());
      PMPI_Abort(MPI_COMM_WORLD, 2);
    }
  for (const std::string& k : o.colls)
    if (!runners().count(k)) {
      if (g_rank == 0) std::fprintf(stderr, "hier-bench: --colls %s: not a collective of src/config/collectives.def\n", k.c_str());
      PMPI_Abort(MPI_COMM_WORLD, 2);
    }
  std::vector<Row> rows;
  bool all_valid = true;
  if (g_rank == 0) std::printf("# hier-bench %s: %d ranks\n%-22s %12s %12s %12s %6s %6s\n", o.label.c_str(), g_size, "collective", "bytes", "median_us", "min_us", "iters", "valid");
  for (const std::string& coll : o.colls) {
    const bool sized = coll != "barrier";
    for (size_t b = o.min_bytes; b <= o.max_bytes; b *= o.step) {
      Row r = measure(o, coll, b);
      all_valid &= r.valid;
      if (g_rank == 0) {
        std::printf("%-22s %12zu %12.2f %12.2f %6d %6s\n", r.coll.c_str(), r.bytes, r.median_us, r.min_us, r.iters, r.valid ? "yes" : "NO");
        std::fflush(stdout);
      }
      rows.push_back(r);
      if (!sized) break;
    }
  }
  if (g_rank == 0 && !o.csv.empty()) {
    std::ofstream f(o.csv);
    f << "label,ranks,collective,bytes,median_us,min_us,iters,valid\n";
    for (const Row& r : rows)
      f << o.label << ',' << g_size << ',' << r.coll << ',' << r.bytes << ',' << r.median_us << ',' << r.min_us << ',' << r.iters << ',' << r.valid << '\n';
  }
  if (g_rank == 0 && !o.json.empty()) {
    std::ofstream f(o.json);
    f << "{\"label\": \"" << o.label << "\", \"ranks\": " << g_size << ", \"results\": [";
    for (size_t i = 0; i < rows.size(); ++i)
      f << (i ? ", " : "") << "{\"collective\": \"" << rows[i].coll << "\", \"bytes\": " << rows[i].bytes << ", \"median_us\": "
        << rows[i].median_us << ", \"min_us\": " << rows[i].min_us << ", \"iters\": " << rows[i].iters
        << ", \"valid\": " << (rows[i].valid ? "true" : "false") << "}";
    f << "]}\n";
  }
  MPI_Finalize();
  return all_valid ? 0 : 3;
}
