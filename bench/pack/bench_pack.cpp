// MPI_Pack / MPI_Unpack throughput: libhier's engine vs the MPI's own (PMPI_Pack / PMPI_Unpack)
// vs a hand-written copy loop for exactly that layout (the floor), in one run, one rank.
//   mpiexec -n 1 bench_pack [--quick] [--filter TEXT]
// --filter runs only the patterns whose name contains TEXT (e.g. --filter indexed).
// Prints a markdown table of throughputs (packed bytes / time), each the best of 9 interleaved
// batches of >= 20 ms (see time_all). The last column says what the interposed MPI_Pack /
// MPI_Unpack would run for that call under the planner's model (HIER_TUNE_FILE or built-in):
// libhier's engine or the MPI's own.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dtype/canon.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"
#include "layouts.hpp"

namespace {

using Clock = std::chrono::steady_clock;
bool g_quick = false;
std::string g_filter;  // run only patterns whose name contains it

// Seconds per call of each fn. The variants are timed interleaved — round after round, each
// variant one batch of >= 20 ms (5 ms with --quick) per round — and each keeps its best batch,
// so that all of them get the same chances at the quiet moments of a shared, noisy machine.
std::vector<double> time_all(const std::vector<std::function<void()>>& fns) {
  const double min_batch = g_quick ? 0.005 : 0.02;
  std::vector<int> reps(fns.size(), 1);
  for (size_t k = 0; k < fns.size(); ++k) {
    fns[k]();  // warm up (page faults, caches)
    for (;;) {
      auto t0 = Clock::now();
      for (int i = 0; i < reps[k]; ++i) fns[k]();
      if (std::chrono::duration<double>(Clock::now() - t0).count() >= min_batch) break;
      reps[k] *= 2;
    }
  }
  std::vector<double> best(fns.size(), 1e30);
  for (int round = 0; round < 9; ++round)
    for (size_t k = 0; k < fns.size(); ++k) {
      auto t0 = Clock::now();
      for (int i = 0; i < reps[k]; ++i) fns[k]();
      best[k] = std::min(best[k], std::chrono::duration<double>(Clock::now() - t0).count() / reps[k]);
    }
  return best;
}

void run(const hier::bench::PackLayout& c) {
  MPI_Datatype t = c.type;
  if (!g_filter.empty() && c.name.find(g_filter) == std::string::npos) {
    MPI_Type_free(&t);
    return;
  }
  MPI_Type_commit(&t);
  int size = 0;
  MPI_Type_size(t, &size);
  const int64_t bytes = static_cast<int64_t>(size) * c.count;
  hier::dtype::CanonRef canon(hier::dtype::canonicalize(t));
  std::vector<char> a(bytes), b(bytes), f(bytes);
  // Correctness first: all three produce the same bytes.
  int pos = 0;
  PMPI_Pack(c.base, c.count, t, a.data(), static_cast<int>(bytes), &pos, MPI_COMM_SELF);
  if (canon->ok) hier::dtype::pack(*canon, c.base, c.count, b.data());
  c.floor_pack(f.data());
  const bool same = canon->ok && a == b && a == f;
  auto noop = [] {};
  const auto pk = time_all({[&] { c.floor_pack(f.data()); },
                            canon->ok ? std::function<void()>([&] { hier::dtype::pack(*canon, c.base, c.count, b.data()); }) : noop,
                            [&] {
                              int p = 0;
                              PMPI_Pack(c.base, c.count, t, a.data(), static_cast<int>(bytes), &p, MPI_COMM_SELF);
                            }});
  const auto up = time_all({[&] { c.floor_unpack(f.data()); },
                            canon->ok ? std::function<void()>([&] { hier::dtype::unpack(*canon, b.data(), c.count, c.base); }) : noop,
                            [&] {
                              int p = 0;
                              PMPI_Unpack(a.data(), static_cast<int>(bytes), &p, c.base, c.count, t, MPI_COMM_SELF);
                            }});
  const double t_floor = pk[0], t_lib = canon->ok ? pk[1] : 0, t_mpi = pk[2];
  const double u_floor = up[0], u_lib = canon->ok ? up[1] : 0, u_mpi = up[2];
  auto gbs = [&](double s) { return s > 0 ? bytes / s / 1e9 : 0.0; };
  auto pick = [&](bool engine) { return canon->ok && engine ? "libhier" : "MPI"; };
  std::printf("| %s | %lld | %lld | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.2f | %s / %s |%s\n", c.name.c_str(),
              static_cast<long long>(bytes / 1024), static_cast<long long>(canon->blocks * c.count), gbs(t_floor),
              gbs(t_lib), gbs(t_mpi), t_lib > 0 ? t_mpi / t_lib : 0.0, gbs(u_floor), gbs(u_lib), gbs(u_mpi),
              u_lib > 0 ? u_mpi / u_lib : 0.0, pick(canon->ok && hier::dtype::plan_engine_pack(*canon, c.count)),
              pick(canon->ok && hier::dtype::plan_engine_unpack(*canon, c.count)), same ? "" : " **MISMATCH**");
  std::fflush(stdout);
  MPI_Type_free(&t);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") g_quick = true;
    else if (a == "--filter" && i + 1 < argc) g_filter = argv[++i];
  }
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len;
  MPI_Get_library_version(lib, &len);
  std::string l(lib, len);
  l = l.substr(0, l.find_first_of("\n,"));
  std::printf("MPI: %s\n\n", l.c_str());
  std::printf("| pattern | KiB | blocks | pack floor GB/s | pack libhier GB/s | pack MPI GB/s | MPI time / libhier time |"
              " unpack floor GB/s | unpack libhier GB/s | unpack MPI GB/s | MPI time / libhier time |"
              " interposed pack / unpack runs |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");

  hier::bench::for_each_pack_layout(run);
  MPI_Finalize();
  return 0;
}
