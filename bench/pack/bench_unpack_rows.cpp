// Unpacking narrow rows far apart, with and without a write prefetch (no MPI, one process): the
// x face of a 68^3 grid of doubles (64x64 rows of W bytes, 544 B apart, as in the 3D halo
// benchmark), L1/L2 evicted before each unpack (a 4 MiB memset), one of 8 grids in turn. This is
// the measurement behind the prefetch in src/device/host.cpp (rows up to 16 B only).
//   bench_unpack_rows [--reps R]
// Prints, per row width, the best time of R unpacks without prefetch and with a prefetch for
// writing 8 rows ahead, interleaved.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

template <int W, int kAhead>
__attribute__((noinline)) void unpack(char* base, long sy, long sz, int ny, int nz, const char* in) {
  for (int z = 0; z < nz; ++z) {
    char* p = base + z * sz;
    int y = 0;
    if (kAhead)
      for (; y < ny - kAhead; ++y) {
        __builtin_prefetch(p + static_cast<long>(y + kAhead) * sy, 1);
        std::memcpy(p + y * sy, in, W);
        in += W;
      }
    for (; y < ny; ++y) {
      std::memcpy(p + y * sy, in, W);
      in += W;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 300;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
  const int n = 64, L = 68;
  const long sy = L * 8, sz = static_cast<long>(L) * L * 8;
  std::vector<std::vector<double>> grids(8, std::vector<double>(static_cast<size_t>(L) * L * L, 1.0));
  std::vector<char> in(static_cast<size_t>(n) * n * 64, 1), thrash(4 << 20);
  auto best = [&](auto f) {
    double b = 1e30;
    for (int r = 0; r < reps; ++r) {
      std::memset(thrash.data(), r, thrash.size());
      char* base = reinterpret_cast<char*>(grids[r % 8].data()) + ((2L * L + 2) * L + 32) * 8;
      const auto t0 = std::chrono::steady_clock::now();
      f(base, in.data());
      b = std::min(b, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    return b;
  };
  std::printf("x face of a %d^3 grid of doubles, %dx%d rows %ld B apart, L1/L2 cold; best of %d, us\n", L, n, n, sy, reps);
  std::printf("| row bytes | no prefetch | prefetch 8 rows ahead | ratio |\n|---|---|---|---|\n");
  auto row = [&](int w, double a, double b) { std::printf("| %d | %.1f | %.1f | %.2f |\n", w, a, b, a / b); };
  double a, b;
  a = best([&](char* p, const char* i) { unpack<8, 0>(p, sy, sz, n, n, i); });
  b = best([&](char* p, const char* i) { unpack<8, 8>(p, sy, sz, n, n, i); });
  row(8, a, b);
  a = best([&](char* p, const char* i) { unpack<16, 0>(p, sy, sz, n, n, i); });
  b = best([&](char* p, const char* i) { unpack<16, 8>(p, sy, sz, n, n, i); });
  row(16, a, b);
  a = best([&](char* p, const char* i) { unpack<32, 0>(p, sy, sz, n, n, i); });
  b = best([&](char* p, const char* i) { unpack<32, 8>(p, sy, sz, n, n, i); });
  row(32, a, b);
  a = best([&](char* p, const char* i) { unpack<64, 0>(p, sy, sz, n, n, i); });
  b = best([&](char* p, const char* i) { unpack<64, 8>(p, sy, sz, n, n, i); });
  row(64, a, b);
  return 0;
}
