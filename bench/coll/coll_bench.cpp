// Flat vs hierarchical collectives in ONE run: each repetition times PMPI_X (what the MPI
// library does alone: the flat baseline) and MPI_X (through the preloaded libhier, run with
// HIER_ALGO=hier so that every size goes hierarchical), alternating which goes first; the
// figure per variant is the median over repetitions of the slowest rank's time.
//
//   mpiexec -n 8 -x LD_PRELOAD=build/openmpi/libhier.so -x HIER_LEVELS=node:4 -x HIER_ALGO=hier
//       build/openmpi/bench/coll/coll_bench [--min BYTES] [--max BYTES] [--colls a,b,...]
//       [--budget SECONDS] [--only flat|hier --reps N]
//
// Sizes are the whole vector of one rank: allreduce / bcast the message, reduce_scatter_block
// the input (each rank keeps 1/P), allgather the output (each rank gives 1/P). Data are ints
// (exact), and every size checks once that both variants agree.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  long min = 16, max = 64L << 20;
  std::vector<std::string> colls{"allreduce", "allgather", "reduce_scatter_block", "bcast"};
  double budget_s = 0.5;  // per size and variant, roughly
  std::string only;       // "flat" or "hier": time one variant (e.g. to count link bytes)
  int reps = 0;           // fixed repetitions (0: from the budget)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--min") o.min = std::atol(v.c_str());
    else if (k == "--max") o.max = std::atol(v.c_str());
    else if (k == "--budget") o.budget_s = std::atof(v.c_str());
    else if (k == "--only") o.only = v;
    else if (k == "--reps") o.reps = std::atoi(v.c_str());
    else if (k == "--colls") {
      o.colls.clear();
      size_t p = 0;
      while (p <= v.size()) {
        const size_t q = std::min(v.find(',', p), v.size());
        o.colls.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    }
  }
  return o;
}

struct Bufs {
  std::vector<int> in, out;
};

// One call of `coll` on `n` ints of vector; hier = through libhier (MPI_X), else PMPI_X.
int call(const std::string& coll, bool hier, Bufs& b, int n, int P) {
  auto* in = b.in.data();
  auto* out = b.out.data();
  if (coll == "allreduce")
    return hier ? MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                : PMPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (coll == "reduce_scatter_block")
    return hier ? MPI_Reduce_scatter_block(in, out, n / P, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                : PMPI_Reduce_scatter_block(in, out, n / P, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (coll == "allgather")
    return hier ? MPI_Allgather(in, n / P, MPI_INT, out, n / P, MPI_INT, MPI_COMM_WORLD)
                : PMPI_Allgather(in, n / P, MPI_INT, out, n / P, MPI_INT, MPI_COMM_WORLD);
  if (coll == "bcast")
    return hier ? MPI_Bcast(out, n, MPI_INT, 0, MPI_COMM_WORLD) : PMPI_Bcast(out, n, MPI_INT, 0, MPI_COMM_WORLD);
  return MPI_ERR_OTHER;
}

double timed(const std::string& coll, bool hier, Bufs& b, int n, int P) {
  PMPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  call(coll, hier, b, n, P);
  double dt = MPI_Wtime() - t0, slowest = 0;
  PMPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const Options o = parse(argc, argv);
  const char* levels = std::getenv("HIER_LEVELS");
  if (rank == 0)
    std::printf("# coll_bench: %d ranks, HIER_LEVELS=%s HIER_ALGO=%s; microseconds, median of the slowest rank\n", P,
                levels ? levels : "(unset)", std::getenv("HIER_ALGO") ? std::getenv("HIER_ALGO") : "(unset)");
  if (rank == 0) std::printf("%-22s %12s %6s %12s %12s %8s %s\n", "collective", "bytes", "reps", "flat_us", "hier_us", "speedup", "check");
  for (const std::string& coll : o.colls) {
    for (long bytes = o.min; bytes <= o.max; bytes *= 4) {
      int n = static_cast<int>(std::max<long>(bytes / 4, 1));
      if (coll != "allreduce" && coll != "bcast") n = std::max(n / P, 1) * P;  // whole blocks
      Bufs b;
      b.in.resize(n);
      b.out.resize(n);
      for (int i = 0; i < n; ++i) b.in[i] = b.out[i] = rank * 7 + i % 1000;
      if (!o.only.empty()) {  // one variant, a fixed number of calls, no check (counting traffic)
        const bool h = o.only == "hier";
        const int reps = o.reps > 0 ? o.reps : 10;
        std::vector<double> t;
        for (int r = 0; r < reps; ++r) t.push_back(timed(coll, h, b, n, P));
        if (rank == 0)
          std::printf("%-22s %12ld %6d %12.1f %12s\n", coll.c_str(), static_cast<long>(n) * 4, reps, median(t) * 1e6, o.only.c_str());
        continue;
      }
      // Correctness once: both variants give the same bytes.
      call(coll, false, b, n, P);
      std::vector<int> ref = b.out;
      std::fill(b.out.begin(), b.out.end(), coll == "bcast" && rank == 0 ? 0 : -1);
      if (coll == "bcast") b.out = rank == 0 ? ref : std::vector<int>(n, -1);
      call(coll, true, b, n, P);
      const size_t valid = coll == "reduce_scatter_block" ? n / P : n;
      int bad = !std::equal(ref.begin(), ref.begin() + valid, b.out.begin()), anybad = 0;
      PMPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      // Repetitions from a first estimate, within the budget; at least 5, at most 200.
      const double est = std::max(timed(coll, false, b, n, P), timed(coll, true, b, n, P));
      int reps = static_cast<int>(std::clamp(o.budget_s / std::max(est, 1e-6), 5.0, 200.0));
      PMPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
      std::vector<double> flat, hier;
      for (int r = 0; r < reps; ++r) {
        const bool hier_first = r % 2;
        const double a = timed(coll, hier_first, b, n, P);
        const double c = timed(coll, !hier_first, b, n, P);
        (hier_first ? hier : flat).push_back(a);
        (hier_first ? flat : hier).push_back(c);
      }
      const double f = median(flat) * 1e6, h = median(hier) * 1e6;
      if (rank == 0)
        std::printf("%-22s %12ld %6d %12.1f %12.1f %8.2f %s\n", coll.c_str(), static_cast<long>(n) * 4, reps, f, h,
                    f / h, anybad ? "MISMATCH" : "ok");
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
