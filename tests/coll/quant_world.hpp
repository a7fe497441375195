// What the quantized collectives' MPI tests share (test_quant.cpp, test_quant_nb.cpp,
// test_quant_f16.cpp): the world's shape under HIER_LEVELS=node:L and the bits under HIER_QUANT,
// the block size and the planner's floor, the float roundings' slack of the bounds, a hash for
// inputs, and the same-bits-everywhere check.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// HIER_QUANT_BLOCK (default 512, quant::kDefaultBlock): blocks are [k*B, (k+1)*B) of the buffer.
int64_t block_size() {
  const char* b = std::getenv("HIER_QUANT_BLOCK");
  return b ? std::atoll(b) : 512;
}
const int64_t kBlock = block_size();

// The planner's floor (model/cost_quant.hpp): a call of fewer than B values per rank in all stays
// exact; above it HIER_ALGO=hier (every variant here) quantizes wherever HIER_QUANT allows.
[[maybe_unused]] bool above_floor(int64_t total_values, int ranks) { return total_values >= kBlock * ranks; }

// quant/kernels.hpp: |x - deq(q(x))| <= s (1/2 + Q 2^-21) with s <= absmax/Q (1 + 2^-22): the
// factor over absmax/(2Q) that the float roundings of the scale allow (about 1 + 1.2e-4 for int8;
// a fixed 1 + 1e-5 was hit at the edge with HIER_QUANT_BLOCK=128).
double slack(int Q) { return (1 + Q * std::ldexp(1.0, -20)) * (1 + std::ldexp(1.0, -22)); }

struct World {
  int rank = 0, size = 1, L = 1, N = 1, Q = 127;
};

World world() {
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  const char* lv = std::getenv("HIER_LEVELS");  // "node:L"
  w.L = lv && std::strncmp(lv, "node:", 5) == 0 ? std::atoi(lv + 5) : w.size;
  w.N = w.size / w.L;
  const char* q = std::getenv("HIER_QUANT");
  w.Q = q && std::string(q).find("int4") != std::string::npos ? 7 : 127;  // int4, or allreduce=int4,...
  return w;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
MPI_Datatype mpi_type() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// Every rank's result bytes equal rank 0's.
void expect_same_everywhere(const void* buf, size_t bytes, const World& w, const std::string& what) {
  std::vector<char> all(bytes * w.size);
  PMPI_Allgather(buf, static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 1; r < w.size; ++r)
    if (std::memcmp(all.data(), all.data() + bytes * r, bytes) != 0) {
      ADD_FAILURE() << what << ": rank " << r << "'s result differs from rank 0's";
      return;
    }
}

// Sum over nodes of the largest |node partial sum| over values [b0, b1) (at offset `first` of
// each rank's row of `stride` values in `all`): the A of the bounds.
template <class T>
double node_absmax_sum(const std::vector<T>& all, int64_t stride, int64_t first, int64_t b0, int64_t b1, const World& w) {
  double A = 0;
  for (int m = 0; m < w.N; ++m) {
    double mx = 0;
    for (int64_t i = b0; i < b1; ++i) {
      double s = 0;
      for (int r = m * w.L; r < (m + 1) * w.L; ++r) s += all[r * stride + first + i];
      mx = std::max(mx, std::fabs(s));
    }
    A += mx;
  }
  return A;
}

}  // namespace
