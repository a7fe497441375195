// The pack benchmarks' layouts (bench/pack/layouts.hpp), with their hand-written floors.
#include "layouts.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace hier::bench {

namespace {

// A struct layout of n elements of T holding a float `x` and an int `id` (whatever else T has
// is the gap the type skips): the pair as an MPI struct resized to sizeof(T), n of them as the
// call's count, or (`one_type`) as ONE contiguous type of n with count 1 at the call, so that
// the engine sees the repetition inside the type, not as the call's count. The floor is the loop
// a user would write for the struct, element by element (b and n copied to locals: a store
// through char* could alias the closure's copies). The host data lives for the process (one
// array per T).
template <class T>
void float_int_struct(const char* name, int n, bool one_type, const std::function<void(const PackLayout&)>& fn) {
  static std::vector<T> v;
  v.assign(static_cast<size_t>(n), T{});
  for (int i = 0; i < n; ++i) {
    v[i].x = static_cast<float>(i);
    v[i].id = i;
  }
  const int bl[2] = {1, 1};
  const MPI_Aint da[2] = {offsetof(T, x), offsetof(T, id)};
  const MPI_Datatype ts[2] = {MPI_FLOAT, MPI_INT};
  MPI_Datatype s, r;
  MPI_Type_create_struct(2, bl, da, ts, &s);
  MPI_Type_create_resized(s, 0, sizeof(T), &r);
  MPI_Type_free(&s);
  int count = n;
  if (one_type) {
    MPI_Datatype c;
    MPI_Type_contiguous(n, r, &c);
    MPI_Type_free(&r);
    r = c;
    count = 1;
  }
  T* b = v.data();
  fn({name, r, count, reinterpret_cast<char*>(b),
      [=](char* p) {
        const T* q = b;
        for (int i = 0, m = n; i < m; ++i) {
          std::memcpy(p + 8 * static_cast<int64_t>(i), &q[i].x, 4);
          std::memcpy(p + 8 * static_cast<int64_t>(i) + 4, &q[i].id, 4);
        }
      },
      [=](const char* p) {
        T* q = b;
        for (int i = 0, m = n; i < m; ++i) {
          std::memcpy(&q[i].x, p + 8 * static_cast<int64_t>(i), 4);
          std::memcpy(&q[i].id, p + 8 * static_cast<int64_t>(i) + 4, 4);
        }
      }});
}

}  // namespace

void for_each_pack_layout(const std::function<void(const PackLayout&)>& fn) {
  // 1. Vectors: blocks of 4 B .. 512 B, stride twice the block, ~2 MiB packed.
  const int64_t total = 2 << 20;
  std::vector<char> vbuf(2 * total + 4096);
  for (size_t i = 0; i < vbuf.size(); ++i) vbuf[i] = static_cast<char>(i * 7);
  for (int bl : {4, 8, 16, 32, 64, 128, 256, 512}) {
    const int n = static_cast<int>(total / bl);
    MPI_Datatype v;
    MPI_Type_vector(n, bl, 2 * bl, MPI_BYTE, &v);
    char* base = vbuf.data();
    // The floor: a copy loop with the block size known at compile time, as a programmer who
    // wrote this one layout by hand would.
    auto floor = [=](auto W, char* p, bool pack) {
      constexpr int w = decltype(W)::value;
      for (int i = 0; i < n; ++i) {
        char* s = base + 2 * static_cast<int64_t>(i) * w;
        if (pack) std::memcpy(p + static_cast<int64_t>(i) * w, s, w);
        else std::memcpy(s, p + static_cast<int64_t>(i) * w, w);
      }
    };
    auto fixed = [=](char* p, bool pack) {
      switch (bl) {
        case 4: return floor(std::integral_constant<int, 4>{}, p, pack);
        case 8: return floor(std::integral_constant<int, 8>{}, p, pack);
        case 16: return floor(std::integral_constant<int, 16>{}, p, pack);
        case 32: return floor(std::integral_constant<int, 32>{}, p, pack);
        case 64: return floor(std::integral_constant<int, 64>{}, p, pack);
        case 128: return floor(std::integral_constant<int, 128>{}, p, pack);
        case 256: return floor(std::integral_constant<int, 256>{}, p, pack);
        default: return floor(std::integral_constant<int, 512>{}, p, pack);
      }
    };
    fn({"vector " + std::to_string(bl) + " B blocks", v, 1, base, [=](char* p) { fixed(p, true); },
         [=](const char* p) { fixed(const_cast<char*>(p), false); }});
  }

  // 2. Faces of a 256^3 double grid (C order), radius 1..3, each axis.
  const int N = 256;
  std::vector<double> grid(static_cast<size_t>(N) * N * N);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<double>(i);
  for (int axis = 0; axis < 3; ++axis) {
    for (int r = 1; r <= 3; ++r) {
      const int sz[3] = {N, N, N};
      int sub[3] = {N, N, N};
      const int st[3] = {0, 0, 0};
      sub[axis] = r;
      MPI_Datatype f;
      MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &f);
      double* g = grid.data();
      const char* an = axis == 0 ? "z" : axis == 1 ? "y" : "x";
      auto loop = [=](double* p, bool pack) {
        size_t k = 0;
        for (int i = 0; i < sub[0]; ++i)
          for (int j = 0; j < sub[1]; ++j) {
            double* row = g + (static_cast<size_t>(i) * N + j) * N;
            if (sub[2] == 1) {  // x faces: one element per row, written as a plain assignment
              for (int q = 0; q < 1; ++q) (pack ? p[k + q] : row[q]) = (pack ? row[q] : p[k + q]);
            } else if (pack) {
              std::memcpy(p + k, row, sub[2] * sizeof(double));
            } else {
              std::memcpy(row, p + k, sub[2] * sizeof(double));
            }
            k += sub[2];
          }
      };
      fn({std::string("256^3 face ") + an + " r=" + std::to_string(r), f, 1, reinterpret_cast<char*>(g),
           [=](char* p) { loop(reinterpret_cast<double*>(p), true); },
           [=](const char* p) { loop(reinterpret_cast<double*>(const_cast<char*>(p)), false); }});
    }
  }

  // 3. Irregular indexed: 64 Ki blocks of 1..16 doubles at shuffled displacements.
  {
    std::mt19937 rng(3);
    const int nb = 1 << 16;
    std::vector<int> bl(nb), di(nb);
    int at = 0;
    for (int i = 0; i < nb; ++i) {
      bl[i] = 1 + static_cast<int>(rng() % 16);
      di[i] = at;
      at += bl[i] + 1 + static_cast<int>(rng() % 8);
    }
    std::vector<int> order(nb);
    for (int i = 0; i < nb; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> sbl(nb), sdi(nb);
    for (int i = 0; i < nb; ++i) {
      sbl[i] = bl[order[i]];
      sdi[i] = di[order[i]];
    }
    static std::vector<double> ibuf;
    ibuf.assign(static_cast<size_t>(at) + 16, 1.0);
    MPI_Datatype t;
    MPI_Type_indexed(nb, sbl.data(), sdi.data(), MPI_DOUBLE, &t);
    double* b = ibuf.data();
    fn({"indexed 64Ki random blocks of 1-16 doubles", t, 1, reinterpret_cast<char*>(b),
         [=](char* p) {
           for (int i = 0; i < nb; ++i) {
             std::memcpy(p, b + sdi[i], sbl[i] * sizeof(double));
             p += sbl[i] * sizeof(double);
           }
         },
         [=](const char* p) {
           for (int i = 0; i < nb; ++i) {
             std::memcpy(b + sdi[i], p, sbl[i] * sizeof(double));
             p += sbl[i] * sizeof(double);
           }
         }});
    // indexed_block of single doubles (LAMMPS-style atom gather), sorted random indices
    std::vector<int> idx(nb);
    for (int i = 0; i < nb; ++i) idx[i] = static_cast<int>(rng() % (at - 1));
    std::sort(idx.begin(), idx.end());
    MPI_Datatype g1;
    MPI_Type_create_indexed_block(nb, 1, idx.data(), MPI_DOUBLE, &g1);
    fn({"indexed_block 64Ki single doubles (atom gather)", g1, 1, reinterpret_cast<char*>(b),
         [=](char* p) {
           double* q = reinterpret_cast<double*>(p);
           for (int i = 0; i < nb; ++i) q[i] = b[idx[i]];
         },
         [=](const char* p) {
           const double* q = reinterpret_cast<const double*>(p);
           for (int i = 0; i < nb; ++i) b[idx[i]] = q[i];
         }});
  }

  // 4. Resized {float, int} structs (float_int_struct): a particle {float x; double pad; int id}
  // -> x and id only; the same pair with no gap, {float x; int id} resized to 8 B (issue 11
  // names this layout: 1.4x its hand-written loop in an earlier MPICH build; packed, it is one
  // contiguous run); issue 25's slow layout, {float x @0; int id @8} resized to 16 B, 2^20 of
  // them in one contiguous type.
  struct P { float x; double pad; int id; };
  struct Q { float x; int id; };
  struct R { float x; int pad; int id; int pad2; };
  static_assert(sizeof(R) == 16 && offsetof(R, id) == 8);
  float_int_struct<P>("resized struct {float,int} of 24 B, 128Ki", 1 << 17, false, fn);
  float_int_struct<Q>("resized struct {float,int} of 8 B, 128Ki", 1 << 17, false, fn);
  float_int_struct<R>("struct {float@0,int@8} of 16 B, 1Mi in one contiguous", 1 << 20, true, fn);

  // 5. DDTBench-style patterns.
  {
    // MILC su3_zd: 3x3 complex matrices (144 B) every other site, 4 directions -> hvector of vectors.
    const int sites = 1 << 13;
    static std::vector<double> lat(static_cast<size_t>(sites) * 2 * 4 * 18);
    MPI_Datatype su3, line;
    MPI_Type_contiguous(18, MPI_DOUBLE, &su3);
    MPI_Type_vector(sites, 4, 8, su3, &line);  // 4 of 8 matrices per site pair
    MPI_Type_free(&su3);
    double* b = lat.data();
    fn({"MILC su3: 8Ki x 4 blocks of 144 B", line, 1, reinterpret_cast<char*>(b),
         [=](char* p) {
           for (int i = 0; i < sites; ++i) std::memcpy(p + static_cast<size_t>(i) * 576, b + static_cast<size_t>(i) * 144, 576);
         },
         [=](const char* p) {
           for (int i = 0; i < sites; ++i) std::memcpy(b + static_cast<size_t>(i) * 144, p + static_cast<size_t>(i) * 576, 576);
         }});
    // NAS LU x-face: 5 doubles per point of a 64x64 face of a 64^3 x 5 array.
    const int M = 64;
    static std::vector<double> u(static_cast<size_t>(M) * M * M * 5);
    const int sz[4] = {M, M, M, 5}, sub[4] = {M, M, 1, 5}, st[4] = {0, 0, 0, 0};
    MPI_Datatype lu;
    MPI_Type_create_subarray(4, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &lu);
    double* ub = u.data();
    fn({"NAS LU face: 64x64 blocks of 40 B", lu, 1, reinterpret_cast<char*>(ub),
         [=](char* p) {
           for (int i = 0; i < M * M; ++i) std::memcpy(p + 40 * i, ub + static_cast<size_t>(i) * M * 5, 40);
         },
         [=](const char* p) {
           for (int i = 0; i < M * M; ++i) std::memcpy(ub + static_cast<size_t>(i) * M * 5, p + 40 * i, 40);
         }});
    // FFT2 transpose column: 1 complex double (16 B) every 1024.
    const int F = 1024;
    static std::vector<double> fft(static_cast<size_t>(F) * F * 2);
    MPI_Datatype col;
    MPI_Type_vector(F * 64, 1, 16, MPI_C_DOUBLE_COMPLEX, &col);
    double* fb = fft.data();
    fn({"FFT2 column: 64Ki complex (16 B) stride 256 B", col, 1, reinterpret_cast<char*>(fb),
         [=](char* p) {
           for (int i = 0; i < F * 64; ++i) std::memcpy(p + 16 * i, fb + static_cast<size_t>(i) * 32, 16);
         },
         [=](const char* p) {
           for (int i = 0; i < F * 64; ++i) std::memcpy(fb + static_cast<size_t>(i) * 32, p + 16 * i, 16);
         }});
    // WRF-style: struct of 3 variables' y-halos (subarrays of 3 different 128^2 x 32 arrays).
    const int X = 128, Z = 32;
    static std::vector<float> v1(X * X * Z), v2(X * X * Z), v3(X * X * Z);
    const int wsz[3] = {Z, X, X}, wsub[3] = {Z, 2, X}, wst[3] = {0, 0, 0};
    MPI_Datatype face;
    MPI_Type_create_subarray(3, wsz, wsub, wst, MPI_ORDER_C, MPI_FLOAT, &face);
    // Displacements relative to the first array (MPICH 4.0.2's MPI_Pack rejects MPI_BOTTOM).
    MPI_Aint d[3], a0;
    MPI_Get_address(v1.data(), &a0);
    MPI_Get_address(v2.data(), &d[1]);
    MPI_Get_address(v3.data(), &d[2]);
    d[0] = 0;
    d[1] -= a0;
    d[2] -= a0;
    const int ones[3] = {1, 1, 1};
    const MPI_Datatype fs[3] = {face, face, face};
    MPI_Datatype wrf;
    MPI_Type_create_struct(3, ones, d, fs, &wrf);
    MPI_Type_free(&face);
    float* vs[3] = {v1.data(), v2.data(), v3.data()};
    auto loop = [=](char* p, bool pack) {
      for (float* v : vs)
        for (int z = 0; z < Z; ++z) {
          float* row = v + static_cast<size_t>(z) * X * X;
          if (pack) std::memcpy(p, row, 2 * X * sizeof(float));
          else std::memcpy(row, p, 2 * X * sizeof(float));
          p += 2 * X * sizeof(float);
        }
    };
    fn({"WRF y-halo: struct of 3 arrays, 32 blocks of 1 KiB each", wrf, 1, reinterpret_cast<char*>(v1.data()),
         [=](char* p) { loop(p, true); }, [=](const char* p) { loop(const_cast<char*>(p), false); }});
  }
}

}  // namespace hier::bench
