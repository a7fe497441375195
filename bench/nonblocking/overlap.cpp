// Overlap of a nonblocking MPI_Iallreduce with computation, as OSU's osu_iallreduce measures it:
//   t_comm    : MPI_Iallreduce + MPI_Wait alone
//   t_compute : a busy loop calibrated to last t_comm
//   t_total   : MPI_Iallreduce, the busy loop (with MPI_Test every --test-us microseconds, 0 =
//               none, as OSU), MPI_Wait
//   overlap % = 100 * (1 - (t_total - t_compute) / t_comm), clipped to [0, 100]
// --work fixed: the computation is a fixed amount of work (the number of loop rounds the
//   calibration run did in t_comm), not a fixed wall time. OSU's loop (the default, --work time)
//   runs for t_comm of wall time, so CPU taken from it (a progress thread on a busy core) is not
//   charged to it; with fixed work it is, and t_total grows by what the computation lost.
// Medians over --iters rounds (after one warm-up), printed by rank 0. A benchmark, never an
// assertion. usage: bench_overlap [--bytes N] [--iters K] [--test-us U] [--work time|fixed]
//   [--done FILE]  (rank 0 creates FILE once the results are printed: minicluster's --done-file)
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
volatile double g_sink = 0;

// Busy work for `seconds` of wall time, or for `rounds` loop rounds when rounds > 0, calling
// MPI_Test on r every test_us microseconds (if r and test_us). Returns the rounds it did.
long compute(double seconds, long rounds, MPI_Request* r, double test_us) {
  const double t0 = MPI_Wtime();
  double next = t0 + test_us * 1e-6;
  double x = 1.0;
  long done = 0;
  while (rounds > 0 ? done < rounds : MPI_Wtime() - t0 < seconds) {
    ++done;
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
    if (r && test_us > 0 && MPI_Wtime() >= next) {
      int flag = 0;
      if (*r != MPI_REQUEST_NULL) MPI_Test(r, &flag, MPI_STATUS_IGNORE);
      next += test_us * 1e-6;
    }
  }
  g_sink = x;
  return done;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  long bytes = 16L << 20;
  int iters = 5;
  double test_us = 0;
  bool fixed_work = false;
  const char* done_file = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bytes")) bytes = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--test-us")) test_us = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--done")) done_file = argv[i + 1];
    else if (!std::strcmp(argv[i], "--work")) fixed_work = !std::strcmp(argv[i + 1], "fixed");
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = static_cast<int>(bytes / 4);
  std::vector<float> in(n, 1.0f), out(n);
  std::vector<double> comm, comp, total;
  for (int it = 0; it <= iters; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Request r;
    MPI_Iallreduce(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    double tc = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &tc, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // one length everywhere
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    const long rounds = compute(tc, 0, nullptr, 0);
    const double tp = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    MPI_Iallreduce(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    compute(tc, fixed_work ? rounds : 0, &r, test_us);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    const double tt = MPI_Wtime() - t0;
    if (it == 0) continue;  // warm-up (schedule cache, connections)
    comm.push_back(tc);
    comp.push_back(tp);
    total.push_back(tt);
  }
  const double c = median(comm), p = median(comp), t = median(total);
  double ov = 100.0 * (1.0 - (t - p) / c);
  ov = std::max(0.0, std::min(100.0, ov));
  if (rank == 0)
    std::printf("work %s bytes %ld ranks %d thread_level %d t_comm_ms %.1f t_compute_ms %.1f t_total_ms %.1f overlap_pct %.0f\n",
                fixed_work ? "fixed" : "time", bytes, size, provided, c * 1e3, p * 1e3, t * 1e3, ov);
  if (rank == 0 && done_file) {
    std::fflush(stdout);
    if (FILE* f = std::fopen(done_file, "w")) std::fclose(f);
  }
  MPI_Finalize();
  return 0;
}
