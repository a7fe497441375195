// Non-contiguous point-to-point end to end: ping-pong of derived types between 2 ranks with
// plain MPI_Send / MPI_Recv, so that the same binary measures the MPI alone (HIER_DISABLE=1 or
// no preload) and libhier (preloaded; HIER_TUNE_FILE may force its decision).
//   mpiexec -n 2 [preload libhier] bench_p2p [--quick]
// Prints one line per pattern: microseconds per message (best of 5 interleaved-free runs).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int N = 128;  // 128^3 doubles: faces of a smaller grid keep this quick
  std::vector<double> grid(static_cast<size_t>(N) * N * N, 1.0), back(grid.size());
  struct Pat {
    std::string name;
    MPI_Datatype t;
  };
  std::vector<Pat> pats;
  auto add = [&](std::string n, MPI_Datatype t) {
    MPI_Type_commit(&t);
    pats.push_back({std::move(n), t});
  };
  MPI_Datatype t;
  MPI_Type_vector(1 << 17, 1, 2, MPI_DOUBLE, &t);
  add("vector 8 B blocks, 1 MiB", t);
  MPI_Type_vector(1 << 11, 64, 128, MPI_DOUBLE, &t);
  add("vector 512 B blocks, 1 MiB", t);
  for (int axis = 0; axis < 3; ++axis) {
    const int sz[3] = {N, N, N}, st[3] = {0, 0, 0};
    int sub[3] = {N, N, N};
    sub[axis] = 2;
    MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t);
    add(std::string("128^3 face r=2 ") + (axis == 0 ? "z" : axis == 1 ? "y" : "x"), t);
  }
  {
    const int bl[2] = {1, 1};
    const MPI_Aint da[2] = {0, 16};
    const MPI_Datatype ts[2] = {MPI_FLOAT, MPI_INT};
    MPI_Datatype s;
    MPI_Type_create_struct(2, bl, da, ts, &s);
    MPI_Type_create_resized(s, 0, 24, &t);
    MPI_Type_free(&s);
    MPI_Datatype c;
    MPI_Type_contiguous(1 << 16, t, &c);
    MPI_Type_free(&t);
    add("resized {float,int} x 64Ki (512 KiB)", c);
  }
  {
    std::mt19937 rng(1);
    std::vector<int> idx(1 << 15);
    for (int& i : idx) i = static_cast<int>(rng() % (N * N * N));
    std::sort(idx.begin(), idx.end());
    MPI_Type_create_indexed_block(static_cast<int>(idx.size()), 1, idx.data(), MPI_DOUBLE, &t);
    add("indexed_block 32Ki doubles (atom gather)", t);
  }
  const char* dis = std::getenv("HIER_DISABLE");
  const char* pre = std::getenv("LD_PRELOAD");
  const char* tf = std::getenv("HIER_TUNE_FILE");
  if (rank == 0)
    std::printf("# mode: %s%s\n", pre && *pre ? (dis && *dis == '1' ? "HIER_DISABLE=1" : "libhier") : "no preload",
                tf ? (std::string(", HIER_TUNE_FILE=") + tf).c_str() : "");
  for (const Pat& p : pats) {
    const int rounds = quick ? 10 : 40;
    double best = 1e30;
    for (int k = 0; k < 5; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < rounds; ++r) {
        if (r % 2 == rank) MPI_Send(grid.data(), 1, p.t, 1 - rank, 0, MPI_COMM_WORLD);
        else MPI_Recv(back.data(), 1, p.t, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / rounds);
    }
    int size;
    MPI_Type_size(p.t, &size);
    if (rank == 0) std::printf("| %s | %d | %.1f |\n", p.name.c_str(), size / 1024, best * 1e6);
    MPI_Datatype x = p.t;
    MPI_Type_free(&x);
  }
  MPI_Finalize();
  return 0;
}
