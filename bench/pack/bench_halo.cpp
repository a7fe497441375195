// 3D halo exchange with all 26 neighbours (6 faces, 12 edges, 8 corners) through
// MPI_Type_create_subarray types and MPI_Isend / MPI_Irecv / MPI_Waitall, as a stencil code
// writes it. The same binary measures the MPI alone (HIER_DISABLE=1, or no preload) and libhier
// (preloaded): bench/pack/halo.sh runs both alternately and prints the ratio.
//   mpiexec -n P bench_halo [--n N] [--ghost G] [--iters I] [--warmup W] [--dirs all|xrows|others]
// P ranks form a periodic 3D grid (MPI_Dims_create); each owns an N^3 block of doubles plus G
// ghost layers on every side. Every exchange is validated twice (before timing and after it,
// with other values and poisoned ghosts): each ghost cell, edges and corners included, must hold
// the value its owner wrote. Prints the median and minimum, over iterations, of the slowest
// rank's exchange time, and a last line `RESULT median_us=... min_us=...` for scripts.
// --dirs xrows exchanges only the 10 messages made of rows of G doubles along x (the 2 x faces
// and the 8 edges with dx != 0: G*8-byte blocks one grid row apart, the ones libhier packs under
// Open MPI), --dirs others the other 16 (y/z faces, the other edges, the corners); ghost cells
// of the directions left out are not checked.
// Exit status: 0 when valid, 1 when a ghost cell is wrong, 2 on bad arguments.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class Dirs { All, XRows, Others };

struct Opts {
  int n = 64, ghost = 2, iters = 50, warmup = 5;
  Dirs dirs = Dirs::All;
};

// The 10 directions whose blocks are rows of G doubles along x: dx != 0, not a corner.
bool xrows(int dz, int dy, int dx) { return dx != 0 && (dz == 0 || dy == 0); }

bool parse(int argc, char** argv, Opts& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dirs" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "all") o.dirs = Dirs::All;
      else if (v == "xrows") o.dirs = Dirs::XRows;
      else if (v == "others") o.dirs = Dirs::Others;
      else return false;
      continue;
    }
    int* dst = a == "--n" ? &o.n : a == "--ghost" ? &o.ghost : a == "--iters" ? &o.iters : a == "--warmup" ? &o.warmup : nullptr;
    if (!dst || i + 1 >= argc) return false;
    *dst = std::atoi(argv[++i]);
  }
  return o.n >= 1 && o.ghost >= 1 && o.ghost <= o.n && o.iters >= 1 && o.warmup >= 0;
}

struct Halo {
  int n, g, L;               // interior, ghost width, local edge n + 2g
  Dirs which;                // the directions exchanged
  int dims[3], coords[3];    // process grid, this rank's place in it (z, y, x)
  MPI_Comm cart;
  std::vector<double> a;     // L^3, C order (z, y, x)
  // Per direction (dz, dy, dx) in {-1, 0, 1}^3 \ {0}: the interior block sent that way, the
  // ghost block filled by the message travelling that way, and the two partners.
  struct Dir {
    int d[3];
    MPI_Datatype send, recv;
    int to, from;
  };
  std::vector<Dir> dirs;

  double* at(int z, int y, int x) { return &a[(static_cast<size_t>(z) * L + y) * L + x]; }

  // The value of global interior cell (z, y, x) (periodic), for exchange `stamp`.
  double value(int stamp, int gz, int gy, int gx) const {
    const long long N[3] = {static_cast<long long>(dims[0]) * n, static_cast<long long>(dims[1]) * n,
                            static_cast<long long>(dims[2]) * n};
    auto wrap = [](long long v, long long m) { return ((v % m) + m) % m; };
    const long long id = (wrap(gz, N[0]) * N[1] + wrap(gy, N[1])) * N[2] + wrap(gx, N[2]);
    return static_cast<double>(stamp) * 1e12 + static_cast<double>(id);
  }

  void fill(int stamp) {
    for (int z = 0; z < L; ++z)
      for (int y = 0; y < L; ++y)
        for (int x = 0; x < L; ++x) {
          const bool inside = z >= g && z < g + n && y >= g && y < g + n && x >= g && x < g + n;
          *at(z, y, x) = inside ? value(stamp, coords[0] * n + z - g, coords[1] * n + y - g, coords[2] * n + x - g) : -1.0;
        }
  }

  // Ghost cells that do not hold their owner's value (every cell outside the interior).
  // Whether the ghost cell (z, y, x) is filled by an exchanged direction.
  bool exchanged(int z, int y, int x) const {
    if (which == Dirs::All) return true;
    auto side = [&](int v) { return v < g ? -1 : v >= g + n ? 1 : 0; };
    const int dz = side(z), dy = side(y), dx = side(x);
    return xrows(dz, dy, dx) == (which == Dirs::XRows);
  }

  long long check(int stamp) {
    long long bad = 0;
    for (int z = 0; z < L; ++z)
      for (int y = 0; y < L; ++y)
        for (int x = 0; x < L; ++x) {
          const bool inside = z >= g && z < g + n && y >= g && y < g + n && x >= g && x < g + n;
          if (!inside && !exchanged(z, y, x)) continue;
          const double want = value(stamp, coords[0] * n + z - g, coords[1] * n + y - g, coords[2] * n + x - g);
          if (*at(z, y, x) != want && ++bad <= 3) {
            int r;
            MPI_Comm_rank(cart, &r);
            std::fprintf(stderr, "rank %d: cell (z %d, y %d, x %d) holds %.17g, expected %.17g\n", r, z, y, x,
                         *at(z, y, x), want);
          }
        }
    return bad;
  }

  Halo(int n_, int g_, Dirs which_) : n(n_), g(g_), L(n_ + 2 * g_), which(which_) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dims[0] = dims[1] = dims[2] = 0;
    MPI_Dims_create(size, 3, dims);
    const int periods[3] = {1, 1, 1};
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    int rank;
    MPI_Comm_rank(cart, &rank);
    MPI_Cart_coords(cart, rank, 3, coords);
    a.assign(static_cast<size_t>(L) * L * L, 0.0);
    const int sizes[3] = {L, L, L};
    for (int dz = -1; dz <= 1; ++dz)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          if (!dz && !dy && !dx) continue;
          if (which != Dirs::All && xrows(dz, dy, dx) != (which == Dirs::XRows)) continue;
          Dir r{{dz, dy, dx}, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, 0, 0};
          int sub[3], sst[3], rst[3], to[3], from[3];
          for (int k = 0; k < 3; ++k) {
            const int d = r.d[k];
            sub[k] = d ? g : n;
            sst[k] = d < 0 ? g : d > 0 ? n : g;      // the interior layers next to that side
            rst[k] = d > 0 ? 0 : d < 0 ? g + n : g;  // the ghost layers on the opposite side
            to[k] = coords[k] + d;
            from[k] = coords[k] - d;
          }
          MPI_Type_create_subarray(3, sizes, sub, sst, MPI_ORDER_C, MPI_DOUBLE, &r.send);
          MPI_Type_create_subarray(3, sizes, sub, rst, MPI_ORDER_C, MPI_DOUBLE, &r.recv);
          MPI_Type_commit(&r.send);
          MPI_Type_commit(&r.recv);
          MPI_Cart_rank(cart, to, &r.to);
          MPI_Cart_rank(cart, from, &r.from);
          dirs.push_back(r);
        }
  }

  ~Halo() {
    for (Dir& r : dirs) {
      MPI_Type_free(&r.send);
      MPI_Type_free(&r.recv);
    }
    MPI_Comm_free(&cart);
  }

  // One exchange; the tag is the direction, so partners that coincide (2 or 1 ranks along an
  // axis) still match each message with its own ghost block.
  void exchange() {
    std::vector<MPI_Request> req(2 * dirs.size());
    for (size_t i = 0; i < dirs.size(); ++i)
      MPI_Irecv(a.data(), 1, dirs[i].recv, dirs[i].from, static_cast<int>(i), cart, &req[i]);
    for (size_t i = 0; i < dirs.size(); ++i)
      MPI_Isend(a.data(), 1, dirs[i].send, dirs[i].to, static_cast<int>(i), cart, &req[dirs.size() + i]);
    MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
  }

  bool validated_exchange(int stamp) {
    fill(stamp);
    exchange();
    long long bad = check(stamp), all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_LONG_LONG, MPI_SUM, cart);
    return all == 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Opts o;
  if (!parse(argc, argv, o)) {
    if (rank == 0)
      std::fprintf(stderr, "usage: bench_halo [--n N >= 1] [--ghost G, 1..N] [--iters I >= 1] [--warmup W >= 0] "
                           "[--dirs all|xrows|others]\n");
    MPI_Finalize();
    return 2;
  }
  int status = 0;
  {
    Halo h(o.n, o.ghost, o.dirs);
    bool ok = h.validated_exchange(1);
    for (int i = 0; i < o.warmup; ++i) h.exchange();
    std::vector<double> t(o.iters), tmax(o.iters);
    for (int i = 0; i < o.iters; ++i) {
      MPI_Barrier(h.cart);
      const double t0 = MPI_Wtime();
      h.exchange();
      t[i] = MPI_Wtime() - t0;
    }
    MPI_Reduce(t.data(), tmax.data(), o.iters, MPI_DOUBLE, MPI_MAX, 0, h.cart);
    ok = h.validated_exchange(2) && ok;
    if (rank == 0) {
      std::sort(tmax.begin(), tmax.end());
      const double med = tmax[tmax.size() / 2] * 1e6, mn = tmax[0] * 1e6;
      const char* dis = std::getenv("HIER_DISABLE");
      const char* pre = std::getenv("LD_PRELOAD");
      const bool lib = pre && std::strstr(pre, "libhier") && !(dis && std::string(dis) == "1");
      long long bytes = 0;
      for (const auto& r : h.dirs) {
        int s;
        MPI_Type_size(r.send, &s);
        bytes += s;
      }
      char lib_version[MPI_MAX_LIBRARY_VERSION_STRING];
      int len;
      MPI_Get_library_version(lib_version, &len);
      std::string v(lib_version, static_cast<size_t>(len));
      std::printf("MPI: %s\n", v.substr(0, v.find_first_of("\n,")).c_str());
      const char* which = o.dirs == Dirs::All ? "26 neighbours" : o.dirs == Dirs::XRows ? "10 of 26 neighbours (xrows)"
                                                                                        : "16 of 26 neighbours (others)";
      std::printf("halo: %d ranks (%d x %d x %d, periodic), %d^3 doubles + %d ghost layers, %s, "
                  "%lld KiB sent per rank per exchange, %s\n",
                  size, h.dims[0], h.dims[1], h.dims[2], o.n, o.ghost, which, bytes / 1024,
                  lib ? "libhier" : "MPI alone");
      std::printf("exchange time (slowest rank), %d iterations: median %.1f us, min %.1f us; ghost cells %s\n", o.iters,
                  med, mn, ok ? "valid" : "WRONG");
      std::printf("RESULT median_us=%.3f min_us=%.3f valid=%d\n", med, mn, ok ? 1 : 0);
    }
    status = ok ? 0 : 1;
  }
  MPI_Finalize();
  return status;
}
