// Quantized collectives on device buffers (docs/device-buffers.md, "Quantized schedules on
// device buffers"): HIER_QUANT=int8|int4 with HIER_QUANT_FEEDBACK on, a GPU-aware MPI (the
// stand-in of fake_gpu.h) and the simulated GPU module on every rank, so a rank whose buffers
// are device memory runs the quantized schedule with quantize, dequantize(-reduce) and the error
// feedback as the module's kernels, only the records crossing. Each case runs two calls on one
// call site (the residual carries from one to the next) on host buffers through libhier, then
// the same two on fresh device buffers (a fresh site: the residual starts at zero as the host
// site's did): every rank's result must be the host run's bits, call by call. A loose error
// bound against the exact sum (PMPI) keeps the comparison from passing on garbage.
// The second TEST mixes: odd ranks pass host buffers in the "device" run.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../support/world.hpp"
#include "fake_gpu.h"

namespace {

using hier::test::rank_;
using hier::test::size_;

// Buffers of one run, kept until the process ends: a call site is (buffer, count), so a
// reused host address would carry another case's residual into this one.
struct Buffers {
  explicit Buffers(bool dev) : device(dev) {}
  bool device;
  char* get(const std::vector<char>& init) {
    if (!device) {
      static std::deque<std::vector<char>> host;  // never freed: no address is a site twice
      host.push_back(init);
      host.back().resize(init.size() + 1);
      return host.back().data();
    }
    char* p = static_cast<char*>(fake_gpu_alloc(init.size() + 1, 0));  // never reused (fake_gpu.cpp)
    fake_gpu_copy(p, init.data(), init.size());
    return p;
  }
  std::vector<char> read(const char* p, size_t bytes) const {
    if (!device) return {p, p + bytes};
    std::vector<char> v(bytes);
    fake_gpu_copy(v.data(), p, bytes);
    return v;
  }
  void write(char* p, const std::vector<char>& v) {
    if (!device) std::memcpy(p, v.data(), v.size());
    else fake_gpu_copy(p, v.data(), v.size());
  }
};

template <class T>
MPI_Datatype mpi_of() {
  return sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}

// n values of rank r at call k: magnitudes varying per position, so blocks have different scales.
template <class T>
std::vector<char> values(int64_t n, int r, int k) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(std::sin(0.37 * static_cast<double>(i) + r + 0.5 * k) * (1 + (i / 64 + r) % 13));
  std::vector<char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One collective on prepared buffers: in (the input: send buffer, or recv in place) and out.
struct Call {
  std::string name;
  int64_t in_n, out_n;  // values in the input buffer and the result
  int64_t in_at = 0;    // in place: where my input sits in the result buffer (allgather: my block)
  std::function<int(const void* send, void* recv)> run;  // send: MPI_IN_PLACE in place
};

int64_t rs_count(int64_t n, int r) { return n + (r == 0 ? 3 : r % 2); }

template <class T>
std::vector<Call> calls(int64_t n) {
  const int p = size_(), me = rank_();
  const MPI_Datatype t = mpi_of<T>();
  std::vector<Call> c;
  c.push_back({"allreduce", n, n, 0, [=](const void* s, void* r) {
                 return MPI_Allreduce(s, r, static_cast<int>(n), t, MPI_SUM, MPI_COMM_WORLD);
               }});
  c.push_back({"reduce_scatter_block", n * p, n, 0, [=](const void* s, void* r) {
                 return MPI_Reduce_scatter_block(s, r, static_cast<int>(n), t, MPI_SUM, MPI_COMM_WORLD);
               }});
  // Uneven counts (rs_count), none larger than the values before it: MPICH 4.0.2's own in-place
  // MPI_Reduce_scatter (the nomem run) copies a rank's piece with a memcpy that asserts when the
  // piece overlaps its place.
  auto counts = std::make_shared<std::vector<int>>(p);
  int64_t total = 0;
  for (int r = 0; r < p; ++r) total += (*counts)[r] = static_cast<int>(rs_count(n, r));
  c.push_back({"reduce_scatter", total, (*counts)[me], 0, [=](const void* s, void* r) {
                 return MPI_Reduce_scatter(s, r, counts->data(), t, MPI_SUM, MPI_COMM_WORLD);
               }});
  c.push_back({"allgather", n, n * p, n * me, [=](const void* s, void* r) {
                 return MPI_Allgather(s, static_cast<int>(n), t, r, static_cast<int>(n), t, MPI_COMM_WORLD);
               }});
  return c;
}

constexpr int kCalls = 2;  // per site: the residual of call k feeds call k + 1

// The results of kCalls calls of `c` on one site of buffers `b`.
template <class T>
std::vector<std::vector<char>> run_site(const Call& c, bool in_place, Buffers& b) {
  const size_t es = sizeof(T);
  const int me = rank_();
  std::vector<std::vector<char>> out;
  // In place, the input sits in the result buffer: allgather my block at my offset, else all of it.
  const int64_t out_n = in_place && c.name != "allgather" ? c.in_n : c.out_n;
  char* send = in_place ? nullptr : b.get(std::vector<char>(c.in_n * es));
  char* recv = b.get(std::vector<char>(out_n * es));
  for (int k = 0; k < kCalls; ++k) {
    const std::vector<char> in = values<T>(c.in_n, me, k);
    if (!in_place) {
      b.write(send, in);
    } else {
      std::vector<char> init = b.read(recv, out_n * es);
      std::memcpy(init.data() + c.in_at * es, in.data(), in.size());
      b.write(recv, init);
    }
    EXPECT_EQ(c.run(in_place ? MPI_IN_PLACE : send, recv), MPI_SUCCESS) << c.name;
    out.push_back(b.read(recv, c.out_n * es));
  }
  return out;
}

// The exact result of call k (PMPI on host buffers), for the error bound.
template <class T>
std::vector<T> exact(const Call& c, int k) {
  const int p = size_();
  std::vector<char> in = values<T>(c.in_n, rank_(), k);
  std::vector<T> out(static_cast<size_t>(c.out_n));
  const MPI_Datatype t = mpi_of<T>();
  if (c.name == "allgather") {
    PMPI_Allgather(in.data(), static_cast<int>(c.in_n), t, out.data(), static_cast<int>(c.in_n), t, MPI_COMM_WORLD);
  } else {
    std::vector<T> all(static_cast<size_t>(c.in_n));
    PMPI_Allreduce(in.data(), all.data(), static_cast<int>(c.in_n), t, MPI_SUM, MPI_COMM_WORLD);
    int64_t at = 0;  // my piece of the reduction
    if (c.name != "allreduce")
      for (int r = 0; r < rank_(); ++r) at += c.name == "reduce_scatter" ? rs_count(c.out_n - rs_count(0, rank_()), r) : c.out_n;
    std::memcpy(out.data(), all.data() + at, out.size() * sizeof(T));
  }
  (void)p;
  return out;
}

bool bits4() {
  const char* q = std::getenv("HIER_QUANT");
  return q && std::string(q).find("int4") != std::string::npos;
}

// Host run, then the "device" run (device buffers, or host buffers on odd ranks when mixed):
// the same bits call by call, and within a loose bound of the exact result.
template <class T>
void check(int64_t n, bool mixed) {
  for (const Call& c : calls<T>(n))
    for (bool in_place : {false, true}) {
      Buffers host(false), dev(!mixed || rank_() % 2 == 0);
      const auto want = run_site<T>(c, in_place, host);
      const auto got = run_site<T>(c, in_place, dev);
      for (int k = 0; k < kCalls; ++k) {
        // (EXPECT: a rank that stopped here would leave the others waiting in the next call)
        EXPECT_TRUE(got[k] == want[k]) << c.name << (in_place ? " in place" : "") << " of " << n << " "
                                   << (sizeof(T) == 4 ? "float" : "double") << ", call " << k << ", rank " << rank_();
        const std::vector<T> e = exact<T>(c, k);
        double err = 0, norm = 0;
        for (size_t i = 0; i < e.size(); ++i) {
          T g;
          std::memcpy(&g, want[k].data() + i * sizeof(T), sizeof(T));
          err += (double(g) - e[i]) * (double(g) - e[i]);
          norm += double(e[i]) * e[i];
        }
        EXPECT_LE(err, (bits4() ? 0.1 : 0.001) * norm) << c.name << " of " << n << ", call " << k;
      }
    }
}

const int64_t kCounts[] = {0, 1, 7, 4099, 65537};

TEST(QuantDevice, SameBitsAsHost) {
  for (int64_t n : kCounts) check<float>(n, false);
  for (int64_t n : {int64_t{1}, int64_t{4099}}) check<double>(n, false);
}

TEST(QuantDevice, MixedHostAndDeviceRanks) {
  for (int64_t n : {int64_t{1}, int64_t{4099}}) check<float>(n, true);
}

}  // namespace
