// Quantized collectives on device buffers (docs/device-buffers.md, "Quantized schedules on
// device buffers"): HIER_QUANT=int8|int4 with HIER_QUANT_FEEDBACK on, a GPU-aware MPI (the
// stand-in of fake_gpu.h) and the simulated GPU module on every rank, so a rank whose buffers
// are device memory runs the quantized schedule with quantize, dequantize(-reduce) and the error
// feedback as the module's kernels, only the records crossing. Each case runs two calls on one
// call site (the residual carries from one to the next) on host buffers through libhier, then
// the same two on fresh device buffers (a fresh site: the residual starts at zero as the host
// site's did): every rank's result must be the host run's bits, call by call. A loose error
// bound against the exact sum (PMPI) keeps the comparison from passing on garbage.
// The second TEST mixes: odd ranks pass host buffers in the "device" run. The others run the
// nonblocking forms (each call waited for alone, then all four collectives outstanding at once and
// completed in reverse order) and the persistent ones (MPI 4.0: each request started twice, its
// result cleared between the starts), against the same form on host buffers through libhier.
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
#include "forms.hpp"

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

// 16-bit floats (MPICH's MPIX_C_FLOAT16, C's _Float16): only the allgather (MPICH 4.0.2 aborts in
// every reduction of the type, docs/quantization.md), on the device as kernels (16-bit quantize,
// dequantize and feedback), the host run's bits.
#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
#define HIER_TEST_F16 1
using f16 = _Float16;
#endif

template <class T>
MPI_Datatype mpi_of() {
#ifdef HIER_TEST_F16
  if (sizeof(T) == 2) return MPIX_C_FLOAT16;
#endif
  return sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}
const char* name_of_type(size_t bytes) { return bytes == 2 ? "float16" : bytes == 4 ? "float" : "double"; }

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
  // Issues the call in form f (send: MPI_IN_PLACE in place); q: the request of the others.
  std::function<int(Form f, const void* send, void* recv, MPI_Request* q)> issue;
};

int64_t rs_count(int64_t n, int r) { return n + (r == 0 ? 3 : r % 2); }

template <class T>
std::vector<Call> calls(int64_t n) {
  const int p = size_(), me = rank_();
  const MPI_Datatype t = mpi_of<T>();
  std::vector<Call> c;
  const int cn = static_cast<int>(n);
  c.push_back({"allreduce", n, n, 0, [=](Form f, const void* s, void* r, MPI_Request* q) {
                 return ISSUE(Allreduce, Iallreduce, s, r, cn, t, MPI_SUM, MPI_COMM_WORLD);
               }});
  c.push_back({"reduce_scatter_block", n * p, n, 0, [=](Form f, const void* s, void* r, MPI_Request* q) {
                 return ISSUE(Reduce_scatter_block, Ireduce_scatter_block, s, r, cn, t, MPI_SUM, MPI_COMM_WORLD);
               }});
  // Uneven counts (rs_count), none larger than the values before it: MPICH 4.0.2's own in-place
  // MPI_Reduce_scatter (the nomem run) copies a rank's piece with a memcpy that asserts when the
  // piece overlaps its place.
  auto counts = std::make_shared<std::vector<int>>(p);
  int64_t total = 0;
  for (int r = 0; r < p; ++r) total += (*counts)[r] = static_cast<int>(rs_count(n, r));
  c.push_back({"reduce_scatter", total, (*counts)[me], 0, [=](Form f, const void* s, void* r, MPI_Request* q) {
                 return ISSUE(Reduce_scatter, Ireduce_scatter, s, r, counts->data(), t, MPI_SUM, MPI_COMM_WORLD);
               }});
  c.push_back({"allgather", n, n * p, n * me, [=](Form f, const void* s, void* r, MPI_Request* q) {
                 return ISSUE(Allgather, Iallgather, s, cn, t, r, cn, t, MPI_COMM_WORLD);
               }});
  return c;
}

constexpr int kCalls = 2;  // per site: the residual of call k feeds call k + 1

// One site of buffers `b` per call of `cs`, each called kCalls times in form f: call k of every
// collective issued in order, then completed in reverse order (several outstanding at once where
// cs has more than one); a persistent request is made once and started kCalls times, its result
// buffer cleared before each start. Returns out[call][k].
template <class T>
std::vector<std::vector<std::vector<char>>> run_sites(const std::vector<Call>& cs, bool in_place, Buffers& b, Form f) {
  const size_t es = sizeof(T);
  const int me = rank_();
  struct Site {
    int64_t out_n;
    char *send, *recv;
    MPI_Request q = MPI_REQUEST_NULL;
  };
  std::vector<Site> sites;
  for (const Call& c : cs) {
    // In place, the input sits in the result buffer: allgather my block at my offset, else all of it.
    const int64_t out_n = in_place && c.name != "allgather" ? c.in_n : c.out_n;
    char* send = in_place ? nullptr : b.get(std::vector<char>(c.in_n * es));
    sites.push_back({out_n, send, b.get(std::vector<char>(out_n * es))});
  }
  std::vector<std::vector<std::vector<char>>> out(cs.size());
  for (int k = 0; k < kCalls; ++k) {
    for (size_t i = 0; i < cs.size(); ++i) {
      const Call& c = cs[i];
      Site& st = sites[i];
      const std::vector<char> in = values<T>(c.in_n, me, k);
      // (cleared: a persistent start that did nothing would leave the last result there)
      std::vector<char> init(static_cast<size_t>(st.out_n) * es, 0);
      if (in_place) {
        std::memcpy(init.data() + c.in_at * es, in.data(), in.size());
      } else {
        b.write(st.send, in);
      }
      b.write(st.recv, init);
      const void* send = in_place ? MPI_IN_PLACE : st.send;
      if (f != Form::Persistent || k == 0) {
        EXPECT_EQ(c.issue(f, send, st.recv, &st.q), MPI_SUCCESS) << c.name;
      }
      if (f == Form::Persistent) {
        EXPECT_EQ(MPI_Start(&st.q), MPI_SUCCESS) << c.name;
      }
    }
    for (size_t i = cs.size(); i-- > 0;) {
      if (f != Form::Blocking) {
        EXPECT_EQ(MPI_Wait(&sites[i].q, MPI_STATUS_IGNORE), MPI_SUCCESS) << cs[i].name;
      }
      out[i].push_back(b.read(sites[i].recv, cs[i].out_n * es));
    }
  }
  if (f == Form::Persistent) {
    for (Site& st : sites) {
      EXPECT_EQ(MPI_Request_free(&st.q), MPI_SUCCESS);
    }
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

// The device run's results `got` of c against the host run's `want`: the same bits call by
// call, and within a loose bound of the exact result.
template <class T>
void compare(const Call& c, bool in_place, Form f, const std::vector<std::vector<char>>& got,
             const std::vector<std::vector<char>>& want) {
  for (int k = 0; k < kCalls; ++k) {
    // (EXPECT: a rank that stopped here would leave the others waiting in the next call)
    EXPECT_TRUE(got[k] == want[k]) << name_of(f) << " " << c.name << (in_place ? " in place" : "") << " of "
                                   << c.in_n << " " << name_of_type(sizeof(T)) << ", call " << k
                                   << ", rank " << rank_();
    const std::vector<T> e = exact<T>(c, k);
    double err = 0, norm = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      T g;
      std::memcpy(&g, want[k].data() + i * sizeof(T), sizeof(T));
      err += (double(g) - e[i]) * (double(g) - e[i]);
      norm += double(e[i]) * e[i];
    }
    EXPECT_LE(err, (bits4() ? 0.1 : 0.001) * norm) << name_of(f) << " " << c.name << " of " << c.in_n << ", call " << k;
  }
}

// Host run, then the "device" run (device buffers, or host buffers on odd ranks when mixed), in
// form f: each collective on its own, or (together) all four outstanding at once.
template <class T>
void check(int64_t n, bool mixed, Form f = Form::Blocking, bool together = false) {
  std::vector<Call> cs = calls<T>(n);
  if (sizeof(T) == 2) cs.erase(cs.begin(), cs.end() - 1);  // 16 bits: the allgather alone (above)
  for (bool in_place : {false, true}) {
    std::vector<std::vector<Call>> groups;
    if (together) groups.push_back(cs);
    else
      for (const Call& c : cs) groups.push_back({c});
    for (const std::vector<Call>& g : groups) {
      Buffers host(false), dev(!mixed || rank_() % 2 == 0);
      const auto want = run_sites<T>(g, in_place, host, f);
      const auto got = run_sites<T>(g, in_place, dev, f);
      for (size_t i = 0; i < g.size(); ++i) compare<T>(g[i], in_place, f, got[i], want[i]);
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

// Nonblocking: each call waited for alone; the four outstanding together.
TEST(QuantDevice, NonblockingSameBitsAsHost) {
  for (int64_t n : kCounts) check<float>(n, false, Form::Nonblocking);
  for (int64_t n : {int64_t{7}, int64_t{65537}}) check<double>(n, false, Form::Nonblocking);
}

TEST(QuantDevice, NonblockingTogetherSameBitsAsHost) {
  for (int64_t n : {int64_t{7}, int64_t{4099}}) {
    check<float>(n, false, Form::Nonblocking, true);
    check<double>(n, false, Form::Nonblocking, true);
  }
}

// Persistent (MPI 4.0): counts above 0 (a count of 0 goes to MPICH 4.0.2's own persistent
// collectives, which hang on the stand-in's device buffers: tests/device/forms_test.cpp).
TEST(QuantDevice, PersistentSameBitsAsHost) {
#if MPI_VERSION >= 4
  for (int64_t n : kCounts)
    if (n > 0) check<float>(n, false, Form::Persistent);
  for (int64_t n : {int64_t{7}, int64_t{65537}}) check<double>(n, false, Form::Persistent);
#else
  GTEST_SKIP() << "persistent collectives need an MPI 4.0 library";
#endif
}

TEST(QuantDevice, PersistentTogetherSameBitsAsHost) {
#if MPI_VERSION >= 4
  check<float>(4099, false, Form::Persistent, true);
  check<double>(4099, false, Form::Persistent, true);
#else
  GTEST_SKIP() << "persistent collectives need an MPI 4.0 library";
#endif
}

// 16-bit floats, every form (persistent: MPI 4.0, counts above 0, as above).
TEST(QuantDevice, Float16AllgatherSameBitsAsHost) {
#ifdef HIER_TEST_F16
  for (int64_t n : kCounts) {
    check<f16>(n, false);
    check<f16>(n, false, Form::Nonblocking);
#if MPI_VERSION >= 4
    if (n > 0) check<f16>(n, false, Form::Persistent);
#endif
  }
  check<f16>(4099, true);
#else
  GTEST_SKIP() << "no MPIX_C_FLOAT16 in this MPI (Open MPI 4.1 has no 16-bit float type)";
#endif
}

}  // namespace
