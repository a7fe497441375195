// Quantized nonblocking and persistent collectives (HIER_QUANT, exec/coll_quant.cpp through
// exec/request.hpp), on MPI_COMM_WORLD under HIER_LEVELS=node:L, through the preloaded libhier.
// MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Ireduce_scatter and MPI_Iallgather (and, with an
// MPI 4.0 library, MPI_Allreduce_init, MPI_Reduce_scatter_block_init, MPI_Allgather_init started
// twice) must run the blocking call's quantized schedule: each result byte for byte the blocking
// quantized call's on the same input (which the test first makes through libhier), the same
// bytes on every rank, and not the exact result (so the test fails if the request ran exact).
// Several requests are outstanding at once (two quantized calls on different buffers and an exact
// MPI_INT call), completed by one MPI_Waitall in reverse order. Integer and MAXLOC calls under
// HIER_QUANT stay byte-equal to PMPI. QuantNbFeedback (HIER_QUANT_FEEDBACK and HIER_QUANT_CHECK
// on): feedback through requests, two requests outstanding on one call site, the check of
// nonblocking calls (the report check reads it).
//
// The inputs are multiples of a power of two with 12 significant bits: every partial sum of up
// to 8 of them is exact in float, so the exact reduce-scatter inside the node gives the same bits
// whatever order the MPI's blocking and nonblocking reduce-scatter sum in (docs/quantization.md:
// on more than 2 ranks per node, bit-identity between the forms depends on that order otherwise).
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

#include "quant_world.hpp"

namespace {

// k * 2^(e - 12), |k| < 2^12, e in [-4, 4] changing every 300 values (blocks hold small and
// large values); e depends on the index only, so the ranks' values of one element sum exactly.
double input(int rank, int64_t i, int seed) {
  const uint64_t h = mix((static_cast<uint64_t>(seed) << 48) ^ (static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(i));
  const int e = static_cast<int>(mix(static_cast<uint64_t>(i / 300) ^ (static_cast<uint64_t>(seed) << 40)) % 9) - 4;
  const int k = static_cast<int>(h % 8191) - 4095;
  return std::ldexp(static_cast<double>(k), e - 12);
}

template <class T>
const char* tname() {
  return std::is_same_v<T, float> ? "float" : "double";
}

template <class T>
std::vector<T> values(int rank, int64_t n, int seed) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(input(rank, i, seed));
  return v;
}

// Byte-equal to the blocking call's result, and (quantized calls) different from the exact one on
// some rank: random inputs never all survive quantization.
template <class T>
void expect_as_blocking(const std::vector<T>& got, const std::vector<T>& blocking, const std::vector<T>& exact,
                        const std::string& what) {
  ASSERT_EQ(got.size(), blocking.size()) << what;
  EXPECT_EQ(std::memcmp(got.data(), blocking.data(), got.size() * sizeof(T)), 0)
      << what << ": the request's result differs from the blocking call's";
  expect_same_everywhere(got.data(), got.size() * sizeof(T), world(), what);
  int differs = std::memcmp(got.data(), exact.data(), got.size() * sizeof(T)) != 0, any = 0;
  PMPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  EXPECT_TRUE(any) << what << ": equal to the exact result: the call did not run quantized";
}

// The exact MPI_INT request beside the quantized ones: its input, and PMPI's result.
struct IntCall {
  std::vector<int> in, out, ref;
  explicit IntCall(int64_t n, int seed) : in(n), out(n, -1), ref(n) {
    const World w = world();
    for (int64_t i = 0; i < n; ++i)
      in[i] = static_cast<int>(mix(static_cast<uint64_t>(seed) << 40 ^ static_cast<uint64_t>(w.rank) << 32 ^ i) % 2001) - 1000;
    PMPI_Allreduce(in.data(), ref.data(), static_cast<int>(n), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  int start(MPI_Request* r) { return MPI_Iallreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
  void check(const std::string& what) {
    EXPECT_EQ(std::memcmp(out.data(), ref.data(), out.size() * sizeof(int)), 0) << what << ": the exact MPI_INT request";
  }
};

// Waits for reqs in reverse order of their start, in one MPI_Waitall.
void waitall_reversed(std::vector<MPI_Request>& reqs) {
  std::reverse(reqs.begin(), reqs.end());
  ASSERT_EQ(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  for (MPI_Request r : reqs) EXPECT_EQ(r, MPI_REQUEST_NULL);
}

// Counts above the floor (one block per rank) for this world: odd, and not block multiples.
std::vector<int64_t> counts(const World& w) {
  const int64_t f = block_size() * w.size;
  if (std::getenv("COLL_TEST_QUICK")) return {3 * f + 1};  // 8 ranks on 2 cores: one count
  return {f + 3, 3 * f + 1, 9 * f + 17};
}

// ---- Allreduce --------------------------------------------------------------------------------

template <class T>
void allreduce_case(int64_t n, bool in_place, int seed) {
  const World w = world();
  const std::string what = std::string("Iallreduce ") + tname<T>() + " count " + std::to_string(n) +
                           (in_place ? " in-place" : "") + " seed " + std::to_string(seed);
  const MPI_Datatype T_ = mpi_type<T>();
  const int c = static_cast<int>(n);
  const std::vector<T> x1 = values<T>(w.rank, n, seed), x2 = values<T>(w.rank, n, seed + 1000);
  // The blocking quantized results (in place or not, as the requests) and the exact ones.
  std::vector<T> b1 = x1, b2 = x2, e1(n), e2(n);
  ASSERT_EQ(MPI_Allreduce(in_place ? MPI_IN_PLACE : x1.data(), b1.data(), c, T_, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Allreduce(in_place ? MPI_IN_PLACE : x2.data(), b2.data(), c, T_, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Allreduce(x1.data(), e1.data(), c, T_, MPI_SUM, MPI_COMM_WORLD);
  PMPI_Allreduce(x2.data(), e2.data(), c, T_, MPI_SUM, MPI_COMM_WORLD);
  // Three requests outstanding: two quantized on different buffers, one exact of ints.
  std::vector<T> r1 = in_place ? x1 : std::vector<T>(n, T(-1)), r2 = in_place ? x2 : std::vector<T>(n, T(-1));
  IntCall ints(n / 2 + 1, seed);
  std::vector<MPI_Request> reqs(3, MPI_REQUEST_NULL);
  ASSERT_EQ(MPI_Iallreduce(in_place ? MPI_IN_PLACE : x1.data(), r1.data(), c, T_, MPI_SUM, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(ints.start(&reqs[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Iallreduce(in_place ? MPI_IN_PLACE : x2.data(), r2.data(), c, T_, MPI_SUM, MPI_COMM_WORLD, &reqs[2]), MPI_SUCCESS);
  waitall_reversed(reqs);
  expect_as_blocking(r1, b1, e1, what + " (first)");
  expect_as_blocking(r2, b2, e2, what + " (second)");
  ints.check(what);
}

TEST(QuantNb, Iallreduce) {
  int seed = 1;
  for (int64_t n : counts(world()))
    for (bool in_place : {false, true}) {
      allreduce_case<float>(n, in_place, seed++);
      allreduce_case<double>(n, in_place, seed++);
    }
}

// ---- Reduce_scatter(_block) -------------------------------------------------------------------

template <class T>
void reduce_scatter_case(const std::vector<int>& rc, bool block, bool in_place, int seed) {
  const World w = world();
  int64_t total = 0;
  for (int x : rc) total += x;
  const int mine = rc[w.rank];
  const std::string what = std::string(block ? "Ireduce_scatter_block " : "Ireduce_scatter ") + tname<T>() +
                           " total " + std::to_string(total) + (in_place ? " in-place" : "") + " seed " + std::to_string(seed);
  const MPI_Datatype T_ = mpi_type<T>();
  const std::vector<T> x1 = values<T>(w.rank, total, seed), x2 = values<T>(w.rank, total, seed + 1000);
  // The blocking call through libhier (in place or not, as the requests), or PMPI's exact one.
  auto blocking = [&](const std::vector<T>& x, bool pmpi) {
    std::vector<T> out = x;
    const void* s = in_place && !pmpi ? MPI_IN_PLACE : x.data();
    if (block)
      (pmpi ? PMPI_Reduce_scatter_block : MPI_Reduce_scatter_block)(s, out.data(), rc[0], T_, MPI_SUM, MPI_COMM_WORLD);
    else
      (pmpi ? PMPI_Reduce_scatter : MPI_Reduce_scatter)(s, out.data(), rc.data(), T_, MPI_SUM, MPI_COMM_WORLD);
    out.resize(static_cast<size_t>(mine));
    return out;
  };
  const std::vector<T> b1 = blocking(x1, false), b2 = blocking(x2, false), e1 = blocking(x1, true), e2 = blocking(x2, true);
  // In place the result lands at the start of the input buffer.
  std::vector<T> r1 = in_place ? x1 : std::vector<T>(mine, T(-1)), r2 = in_place ? x2 : std::vector<T>(mine, T(-1));
  auto start = [&](const std::vector<T>& x, std::vector<T>& r, MPI_Request* q) {
    const void* s = in_place ? MPI_IN_PLACE : x.data();
    return block ? MPI_Ireduce_scatter_block(s, r.data(), rc[0], T_, MPI_SUM, MPI_COMM_WORLD, q)
                 : MPI_Ireduce_scatter(s, r.data(), rc.data(), T_, MPI_SUM, MPI_COMM_WORLD, q);
  };
  IntCall ints(total / 3 + 1, seed);
  std::vector<MPI_Request> reqs(3, MPI_REQUEST_NULL);
  ASSERT_EQ(start(x1, r1, &reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(ints.start(&reqs[1]), MPI_SUCCESS);
  ASSERT_EQ(start(x2, r2, &reqs[2]), MPI_SUCCESS);
  waitall_reversed(reqs);
  r1.resize(mine);
  r2.resize(mine);
  // Per rank its own piece: byte-equal to the blocking call's; the pieces gathered are the same everywhere.
  std::vector<T> all1(total), all2(total), ball1(total), eall1(total);
  std::vector<int> displs(w.size, 0);
  for (int r = 1; r < w.size; ++r) displs[r] = displs[r - 1] + rc[r - 1];
  PMPI_Allgatherv(r1.data(), mine, T_, all1.data(), rc.data(), displs.data(), T_, MPI_COMM_WORLD);
  PMPI_Allgatherv(b1.data(), mine, T_, ball1.data(), rc.data(), displs.data(), T_, MPI_COMM_WORLD);
  PMPI_Allgatherv(e1.data(), mine, T_, eall1.data(), rc.data(), displs.data(), T_, MPI_COMM_WORLD);
  expect_as_blocking(all1, ball1, eall1, what + " (first)");
  PMPI_Allgatherv(r2.data(), mine, T_, all2.data(), rc.data(), displs.data(), T_, MPI_COMM_WORLD);
  PMPI_Allgatherv(b2.data(), mine, T_, ball1.data(), rc.data(), displs.data(), T_, MPI_COMM_WORLD);
  PMPI_Allgatherv(e2.data(), mine, T_, eall1.data(), rc.data(), displs.data(), T_, MPI_COMM_WORLD);
  expect_as_blocking(all2, ball1, eall1, what + " (second)");
  ints.check(what);
}

TEST(QuantNb, IreduceScatter) {
  const World w = world();
  int seed = 100;
  for (int64_t n : counts(w)) {
    const int per = static_cast<int>(n / w.size);
    std::vector<int> even(w.size, per), uneven(w.size);
    for (int r = 0; r < w.size; ++r) uneven[r] = per + (r % 3) * 37 - (r == 0 ? 11 : 0);
    for (bool in_place : {false, true}) {
      reduce_scatter_case<float>(even, true, in_place, seed++);
      reduce_scatter_case<double>(even, true, in_place, seed++);
      reduce_scatter_case<float>(uneven, false, in_place, seed++);
      reduce_scatter_case<double>(uneven, false, in_place, seed++);
    }
  }
}

// ---- Allgather --------------------------------------------------------------------------------

// mixed: on odd ranks the receive type is one value per 2 slots (MPI_Type_create_resized), a
// non-dense layout of the same type signature, unpacked block by block (StoreBlock), whose gaps
// must stay untouched; even ranks receive dense. Every rank must still take the same schedule.
template <class T>
void allgather_case(int64_t c, bool in_place, bool mixed, int seed) {
  const World w = world();
  const bool recv_gap = mixed && w.rank % 2 == 1;
  const std::string what = std::string("Iallgather ") + tname<T>() + " count " + std::to_string(c) +
                           (in_place ? " in-place" : "") + (mixed ? " mixed receive layouts" : "") + " seed " + std::to_string(seed);
  const MPI_Datatype T_ = mpi_type<T>();
  MPI_Datatype rt = T_;
  if (recv_gap) {
    MPI_Type_create_resized(T_, 0, 2 * sizeof(T), &rt);
    MPI_Type_commit(&rt);
  }
  const int64_t stride = recv_gap ? 2 : 1, n = c * w.size;
  const T sentinel = T(-12345.5);
  const std::vector<T> x1 = values<T>(w.rank, c, seed), x2 = values<T>(w.rank, c, seed + 1000);
  auto layout = [&](const std::vector<T>& x) {  // x as my block of a receive buffer (in place)
    std::vector<T> buf(static_cast<size_t>(n * stride), sentinel);
    for (int64_t i = 0; i < c; ++i) buf[(w.rank * c + i) * stride] = x[i];
    return buf;
  };
  auto dense = [&](const std::vector<T>& buf, const std::string& which) {
    std::vector<T> d(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) d[i] = buf[i * stride];
    if (recv_gap)
      for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(&buf[i * stride + 1], &sentinel, sizeof(T)) != 0) {
          ADD_FAILURE() << what << which << ": the gap after value " << i << " was written";
          break;
        }
    return d;
  };
  auto blocking = [&](const std::vector<T>& x) {
    std::vector<T> buf = layout(x);
    EXPECT_EQ(MPI_Allgather(in_place ? MPI_IN_PLACE : x.data(), static_cast<int>(c), T_, buf.data(), static_cast<int>(c),
                            rt, MPI_COMM_WORLD), MPI_SUCCESS);
    return dense(buf, " (blocking)");
  };
  const std::vector<T> b1 = blocking(x1), b2 = blocking(x2);
  std::vector<T> e1(n), e2(n);
  PMPI_Allgather(x1.data(), static_cast<int>(c), T_, e1.data(), static_cast<int>(c), T_, MPI_COMM_WORLD);
  PMPI_Allgather(x2.data(), static_cast<int>(c), T_, e2.data(), static_cast<int>(c), T_, MPI_COMM_WORLD);
  std::vector<T> r1 = layout(x1), r2 = layout(x2);
  IntCall ints(c + 5, seed);
  std::vector<MPI_Request> reqs(3, MPI_REQUEST_NULL);
  ASSERT_EQ(MPI_Iallgather(in_place ? MPI_IN_PLACE : x1.data(), static_cast<int>(c), T_, r1.data(), static_cast<int>(c), rt,
                           MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(ints.start(&reqs[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Iallgather(in_place ? MPI_IN_PLACE : x2.data(), static_cast<int>(c), T_, r2.data(), static_cast<int>(c), rt,
                           MPI_COMM_WORLD, &reqs[2]), MPI_SUCCESS);
  if (recv_gap) MPI_Type_free(&rt);  // allowed right after the call: the requests hold it
  waitall_reversed(reqs);
  expect_as_blocking(dense(r1, " (first)"), b1, e1, what + " (first)");
  expect_as_blocking(dense(r2, " (second)"), b2, e2, what + " (second)");
  ints.check(what);
}

TEST(QuantNb, Iallgather) {
  const World w = world();
  int seed = 300;
  for (int64_t n : counts(w)) {
    const int64_t c = n / w.size + 1;
    for (bool in_place : {false, true})
      for (bool gap : {false, true}) {
        allgather_case<float>(c, in_place, gap, seed++);
        allgather_case<double>(c, in_place, gap, seed++);
      }
  }
}

// ---- What is not quantized stays exact --------------------------------------------------------

struct FloatInt {
  float v;
  int i;
};

// Under HIER_QUANT, nonblocking integer sums, MAXLOC, float MAX and integer allgathers and
// reduce-scatters are byte-equal to PMPI, outstanding together.
TEST(QuantNb, OthersStayExact) {
  const World w = world();
  for (int64_t n : {int64_t{1000}, int64_t{40961}}) {
    std::vector<int> xi(n), ri(n, -1), pi(n);
    std::vector<FloatInt> xl(n), rl(n), pl(n);
    std::vector<float> xf(n), rf(n), pf(n);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t h = mix(static_cast<uint64_t>(w.rank) << 32 ^ static_cast<uint64_t>(i));
      xi[i] = static_cast<int>(h % 2001) - 1000;
      xl[i] = {static_cast<float>(h % 17), static_cast<int>(h >> 40)};
      xf[i] = static_cast<float>(input(w.rank, i, 99));
    }
    const int c = static_cast<int>(n), per = c / w.size;
    std::vector<int> rsi(per, -1), rsp(per), agi(static_cast<size_t>(per) * w.size, -1), agp(agi.size());
    PMPI_Allreduce(xi.data(), pi.data(), c, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(xl.data(), pl.data(), c, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    PMPI_Allreduce(xf.data(), pf.data(), c, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(xi.data(), rsp.data(), per, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allgather(xi.data(), per, MPI_INT, agp.data(), per, MPI_INT, MPI_COMM_WORLD);
    std::vector<MPI_Request> reqs(5, MPI_REQUEST_NULL);
    ASSERT_EQ(MPI_Iallreduce(xi.data(), ri.data(), c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallreduce(xl.data(), rl.data(), c, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallreduce(xf.data(), rf.data(), c, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD, &reqs[2]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ireduce_scatter_block(xi.data(), rsi.data(), per, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[3]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallgather(xi.data(), per, MPI_INT, agi.data(), per, MPI_INT, MPI_COMM_WORLD, &reqs[4]), MPI_SUCCESS);
    waitall_reversed(reqs);
    const std::string what = "count " + std::to_string(n);
    EXPECT_EQ(std::memcmp(ri.data(), pi.data(), n * sizeof(int)), 0) << what << " int sum";
    EXPECT_EQ(std::memcmp(rl.data(), pl.data(), n * sizeof(FloatInt)), 0) << what << " float_int maxloc";
    EXPECT_EQ(std::memcmp(rf.data(), pf.data(), n * sizeof(float)), 0) << what << " float max";
    EXPECT_EQ(std::memcmp(rsi.data(), rsp.data(), per * sizeof(int)), 0) << what << " int reduce_scatter_block";
    EXPECT_EQ(std::memcmp(agi.data(), agp.data(), agi.size() * sizeof(int)), 0) << what << " int allgather";
  }
}

// ---- Persistent (MPI 4.0) ---------------------------------------------------------------------

#if MPI_VERSION >= 4
// Each persistent request started twice with new data in the same buffers: each start's result
// byte for byte the blocking call's on that data.
template <class T>
void persistent_case(int64_t n, int seed) {
  const World w = world();
  const MPI_Datatype T_ = mpi_type<T>();
  const int c = static_cast<int>(n), per = c / w.size;
  std::vector<T> x(n), ar(n), rs(per), ag(static_cast<size_t>(per) * w.size);
  MPI_Request q[3];
  ASSERT_EQ(MPI_Allreduce_init(x.data(), ar.data(), c, T_, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Reduce_scatter_block_init(x.data(), rs.data(), per, T_, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Allgather_init(x.data(), per, T_, ag.data(), per, T_, MPI_COMM_WORLD, MPI_INFO_NULL, &q[2]), MPI_SUCCESS);
  for (int round = 0; round < 2; ++round) {
    const std::string what = std::string("persistent ") + tname<T>() + " count " + std::to_string(n) + " start " +
                             std::to_string(round + 1);
    const std::vector<T> v = values<T>(w.rank, n, seed + round);
    std::copy(v.begin(), v.end(), x.begin());  // the same buffer: the requests are bound to it
    std::vector<T> bar(n), ear(n), brs(per), ers(per), bag(ag.size()), eag(ag.size());
    ASSERT_EQ(MPI_Allreduce(x.data(), bar.data(), c, T_, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Reduce_scatter_block(x.data(), brs.data(), per, T_, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Allgather(x.data(), per, T_, bag.data(), per, T_, MPI_COMM_WORLD), MPI_SUCCESS);
    PMPI_Allreduce(x.data(), ear.data(), c, T_, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(x.data(), ers.data(), per, T_, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allgather(x.data(), per, T_, eag.data(), per, T_, MPI_COMM_WORLD);
    ASSERT_EQ(MPI_Startall(3, q), MPI_SUCCESS);
    for (int k = 2; k >= 0; --k) ASSERT_EQ(MPI_Wait(&q[k], MPI_STATUS_IGNORE), MPI_SUCCESS);
    expect_as_blocking(ar, bar, ear, what + " allreduce");
    std::vector<T> all(ag.size()), ball(ag.size()), eall(ag.size());
    PMPI_Allgather(rs.data(), per, T_, all.data(), per, T_, MPI_COMM_WORLD);
    PMPI_Allgather(brs.data(), per, T_, ball.data(), per, T_, MPI_COMM_WORLD);
    PMPI_Allgather(ers.data(), per, T_, eall.data(), per, T_, MPI_COMM_WORLD);
    expect_as_blocking(all, ball, eall, what + " reduce_scatter_block");
    expect_as_blocking(ag, bag, eag, what + " allgather");
  }
  for (MPI_Request& r : q) ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS);
}

TEST(QuantNb, PersistentStartedTwice) {
  const int64_t n = counts(world()).back();
  persistent_case<float>(n, 500);
  persistent_case<double>(n, 600);
}
#endif

// ---- Error feedback and the check through requests --------------------------------------------

// With HIER_QUANT_FEEDBACK, K rounds of two requests outstanding on ONE call site (the same send
// buffer, two receive buffers: legal for nonblocking calls, and the site is keyed by the send
// buffer) share its residual: the errors telescope over all 2K results, so their sum stays within
// a few single-call bounds of 2K times the exact sum (without feedback the error would grow with
// K). With HIER_QUANT_CHECK every request is checked (the report check reads the errors).
TEST(QuantNbFeedback, SharedSiteTelescopes) {
  const World w = world();
  const char* fb = std::getenv("HIER_QUANT_FEEDBACK");
  if (!fb || std::string(fb) == "off") GTEST_SKIP() << "feedback off";
  constexpr int K = 12;
  const int64_t n = 20000;
  const int64_t B = block_size();
  std::vector<float> x(n), o1(n), o2(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(input(w.rank, i, 900) * 3.7);  // not exactly representable
  std::vector<float> all(static_cast<size_t>(n) * w.size);
  PMPI_Allgather(x.data(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<double> acc(n, 0.0);
  for (int k = 0; k < K; ++k) {
    MPI_Request r[2];
    ASSERT_EQ(MPI_Iallreduce(x.data(), o1.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallreduce(x.data(), o2.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r[1], MPI_STATUS_IGNORE), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r[0], MPI_STATUS_IGNORE), MPI_SUCCESS);
    expect_same_everywhere(o1.data(), n * sizeof(float), w, "feedback first");
    expect_same_everywhere(o2.data(), n * sizeof(float), w, "feedback second");
    for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(o1[i]) + o2[i];
  }
  // Per element against the single-call allreduce bound (two quantizations per call), as in
  // tests/coll/test_quant.cpp's QuantFeedback: A = sum over nodes of the block's largest |node sum|.
  double worst = 0;
  for (int64_t b0 = 0; b0 < n; b0 += B) {
    const int64_t b1 = std::min(n, b0 + B);
    const double A = node_absmax_sum(all, n, 0, b0, b1, w);
    const double bound1 = A / (2.0 * w.Q) * (2.0 + 1.0 / (2.0 * w.Q)) * slack(w.Q) + 1e-6 * (w.size + 2) * 3 * A;
    for (int64_t i = b0; i < b1; ++i) {
      double ref = 0;
      for (int r = 0; r < w.size; ++r) ref += all[r * n + i];
      worst = std::max(worst, std::fabs(acc[i] - 2 * K * ref) / (3.0 * bound1));
    }
  }
  EXPECT_LE(worst, 1.0) << "accumulated error over " << 2 * K << " requests on one site, in tolerances (3 single-call bounds)";
  // The other collectives once each as requests (checked too).
  const int per = static_cast<int>(n / w.size);
  std::vector<float> rs(per), ag(static_cast<size_t>(per) * w.size);
  MPI_Request r[3];
  ASSERT_EQ(MPI_Ireduce_scatter_block(x.data(), rs.data(), per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
  std::vector<int> rc(w.size, per);
  std::vector<float> rs2(per);
  ASSERT_EQ(MPI_Ireduce_scatter(x.data(), rs2.data(), rc.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Iallgather(x.data(), per, MPI_FLOAT, ag.data(), per, MPI_FLOAT, MPI_COMM_WORLD, &r[2]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Waitall(3, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  expect_same_everywhere(ag.data(), ag.size() * sizeof(float), w, "feedback allgather");
}

}  // namespace
