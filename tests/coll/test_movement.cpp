// Allgather, Allgatherv, Bcast, Alltoall, Gather, Scatter, Barrier through the preloaded libhier (MPI_*) against
// PMPI_* on the same data: receive buffers are pre-filled with the same pattern, so the whole
// buffer (holes of non-contiguous types, gaps between allgatherv blocks) must match byte for byte.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "cases.hpp"
#include "../support/on_device.hpp"

namespace {

using hier::test::on_device;

using coll_test::Env;
using coll_test::env_of;

std::vector<Env> comms() {
  std::vector<Env> v{env_of(MPI_COMM_WORLD)};
  if (coll_test::quick()) return v;
  static MPI_Comm rev = MPI_COMM_NULL;
  if (rev == MPI_COMM_NULL) {  // the same ranks in reverse order
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -r, &rev);
  }
  v.push_back(env_of(rev));
  return v;
}

// Data-movement types: dense ones and a vector with holes (receive side) of the same signature.
struct MoveType {
  std::string name;
  MPI_Datatype type;
  int ints_per_elem;  // signature: this many MPI_INT (or bytes for char)
  MPI_Aint extent;
};

struct MoveTypes {
  MPI_Datatype ivec = MPI_DATATYPE_NULL, ipair = MPI_DATATYPE_NULL;
  MoveTypes() {
    MPI_Type_vector(2, 1, 2, MPI_INT, &ivec);  // 2 ints, extent 3 ints
    MPI_Type_commit(&ivec);
    MPI_Type_contiguous(2, MPI_INT, &ipair);   // the same signature, dense
    MPI_Type_commit(&ipair);
  }
  ~MoveTypes() {
    MPI_Type_free(&ivec);
    MPI_Type_free(&ipair);
  }
  // {send type, receive type}
  std::vector<std::pair<MoveType, MoveType>> list() const {
    return {{{"int", MPI_INT, 1, 4}, {"int", MPI_INT, 1, 4}},
            {{"char", MPI_CHAR, 1, 1}, {"char", MPI_CHAR, 1, 1}},
            {{"int-pair", ipair, 2, 8}, {"int-vector", ivec, 2, 12}},
            {{"int-vector", ivec, 2, 12}, {"int-pair", ipair, 2, 8}}};
  }
};

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> b(std::max<size_t>(bytes, 1));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>((i * 7 + seed * 131 + (i >> 8)) & 0xFF);
  return b;
}

std::vector<int64_t> counts() {
  std::vector<int64_t> v{0, 1, 7, 1000};
  if (std::getenv("COLL_TEST_LARGE")) v.push_back((1 << 20) + 3);
  return v;
}

std::string label(const char* coll, const std::string& types, int64_t n, const Env& e, bool in_place, int root = -1) {
  return std::string(coll) + " " + types + " count " + std::to_string(n) + " comm size " + std::to_string(e.size) +
         (in_place ? " in-place" : "") + (root >= 0 ? " root " + std::to_string(root) : "");
}

TEST(CollMovement, Allgather) {
  MoveTypes mt;
  for (const Env& e : comms())
    for (const auto& [st, rt] : mt.list())
      for (int64_t n : counts())
        for (bool in_place : {false, true}) {
          if (in_place && st.name != rt.name) continue;
          if (n > 100000 && (st.name != "int" || e.comm != MPI_COMM_WORLD)) continue;
          const std::string what = label("allgather", st.name + "->" + rt.name, n, e, in_place);
          const int c = static_cast<int>(n);
          std::vector<char> send = pattern(n * st.extent, e.rank + 1);
          std::vector<char> got = pattern(n * rt.extent * e.size, 99), ref = got;
          if (in_place) {  // my block in place: the same bytes as `send` would be
            std::copy(send.begin(), send.begin() + n * rt.extent, got.begin() + e.rank * n * rt.extent);
            std::copy(send.begin(), send.begin() + n * rt.extent, ref.begin() + e.rank * n * rt.extent);
          }
          const void* s = in_place ? MPI_IN_PLACE : send.data();
          EXPECT_EQ(on_device([&](void* sd, void* r) { return MPI_Allgather(in_place ? MPI_IN_PLACE : sd, c, st.type, r, c, rt.type, e.comm); },
                              send, got),
                    MPI_SUCCESS) << what;
          EXPECT_EQ(PMPI_Allgather(s, c, st.type, ref.data(), c, rt.type, e.comm), MPI_SUCCESS) << what;
          EXPECT_TRUE(got == ref) << what << ": differs from PMPI_Allgather";
        }
}

TEST(CollMovement, Allgatherv) {
  for (const Env& e : comms())
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{700}})
      for (bool in_place : {false, true}) {
        // Counts differ per rank (some zero); blocks placed in reverse order with gaps.
        std::vector<int> cnt(e.size), disp(e.size);
        int64_t off = 0;
        for (int r = e.size - 1; r >= 0; --r) {
          cnt[r] = static_cast<int>(r % 3 == 2 ? 0 : n + r);
          disp[r] = static_cast<int>(off);
          off += cnt[r] + 3;
        }
        const std::string what = label("allgatherv", "int", n, e, in_place);
        std::vector<int> send(std::max(cnt[e.rank], 1));
        for (int i = 0; i < cnt[e.rank]; ++i) send[i] = e.rank * 100000 + i;
        std::vector<int> got(off + 1, -7), ref(off + 1, -7);
        if (in_place) {
          std::copy(send.begin(), send.begin() + cnt[e.rank], got.begin() + disp[e.rank]);
          std::copy(send.begin(), send.begin() + cnt[e.rank], ref.begin() + disp[e.rank]);
        }
        const void* s = in_place ? MPI_IN_PLACE : send.data();
        EXPECT_EQ(on_device([&](void* sd, void* r) {
                    return MPI_Allgatherv(in_place ? MPI_IN_PLACE : sd, cnt[e.rank], MPI_INT, r, cnt.data(), disp.data(), MPI_INT, e.comm);
                  }, send, got), MPI_SUCCESS) << what;
        EXPECT_EQ(PMPI_Allgatherv(s, cnt[e.rank], MPI_INT, ref.data(), cnt.data(), disp.data(), MPI_INT, e.comm), MPI_SUCCESS) << what;
        EXPECT_TRUE(got == ref) << what << ": differs from PMPI_Allgatherv";
      }
}

TEST(CollMovement, Bcast) {
  MoveTypes mt;
  for (const Env& e : comms())
    for (const auto& [st, rt] : mt.list())
      for (int64_t n : counts()) {
        if (n > 100000 && (st.name != "int" || e.comm != MPI_COMM_WORLD)) continue;
        std::set<int> roots{0, e.size - 1, e.size / 2, 1 % e.size};
        for (int root : roots) {
          // The root sends `st`, the others receive `rt`: the same signature.
          const MoveType& t = e.rank == root ? st : rt;
          const std::string what = label("bcast", st.name + "->" + rt.name, n, e, false, root);
          std::vector<char> got = pattern(n * t.extent, e.rank == root ? 5 : 6 + e.rank), ref = got;
          EXPECT_EQ(on_device([&](void* b) { return MPI_Bcast(b, static_cast<int>(n), t.type, root, e.comm); }, got), MPI_SUCCESS) << what;
          EXPECT_EQ(PMPI_Bcast(ref.data(), static_cast<int>(n), t.type, root, e.comm), MPI_SUCCESS) << what;
          EXPECT_TRUE(got == ref) << what << ": differs from PMPI_Bcast";
        }
      }
}

TEST(CollMovement, Alltoall) {
  MoveTypes mt;
  for (const Env& e : comms())
    for (const auto& [st, rt] : mt.list())
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{300}})
        for (bool in_place : {false, true}) {
          if (in_place && st.name != rt.name) continue;
          const std::string what = label("alltoall", st.name + "->" + rt.name, n, e, in_place);
          const int c = static_cast<int>(n);
          std::vector<char> send = pattern(n * st.extent * e.size, e.rank + 1);
          std::vector<char> got = in_place ? send : pattern(n * rt.extent * e.size, 77), ref = got;
          const void* s = in_place ? MPI_IN_PLACE : send.data();
          EXPECT_EQ(on_device([&](void* sd, void* r) { return MPI_Alltoall(in_place ? MPI_IN_PLACE : sd, c, st.type, r, c, rt.type, e.comm); },
                              send, got),
                    MPI_SUCCESS) << what;
          EXPECT_EQ(PMPI_Alltoall(s, c, st.type, ref.data(), c, rt.type, e.comm), MPI_SUCCESS) << what;
          EXPECT_TRUE(got == ref) << what << ": differs from PMPI_Alltoall";
        }
}

// The sweep of the rooted collectives: communicators, {send, receive} types, counts, roots,
// the root in place or not (the same type on both sides there); a large count only once.
struct Rooted {
  const Env& e;
  const MoveType &st, &rt;
  int64_t n;
  int root;
  bool in_place;
  bool ip() const { return in_place && e.rank == root; }  // only the root passes MPI_IN_PLACE
  std::string what(const char* coll) const { return label(coll, st.name + "->" + rt.name, n, e, in_place, root); }
};
template <class F>
void each_rooted(F f) {
  MoveTypes mt;
  for (const Env& e : comms())
    for (const auto& [st, rt] : mt.list())
      for (int64_t n : counts())
        for (int root : std::set<int>{0, e.size - 1, e.size / 2, 1 % e.size})
          for (bool in_place : {false, true}) {
            if (in_place && st.name != rt.name) continue;
            if (n > 100000 && (st.name != "int" || e.comm != MPI_COMM_WORLD || root != 1 % e.size)) continue;
            f(Rooted{e, st, rt, n, root, in_place});
          }
}

// Every rank's buffers are compared, the root's and the others' (which neither call may touch
// where MPI ignores them: a gather's receive buffer off the root).
TEST(CollMovement, Gather) {
  each_rooted([](const Rooted& x) {
    const Env& e = x.e;
    const std::string what = x.what("gather");
    const int c = static_cast<int>(x.n);
    std::vector<char> send = pattern(x.n * x.st.extent, e.rank + 1);
    std::vector<char> got = pattern(x.n * x.rt.extent * e.size, 40 + e.rank), ref = got;
    if (x.ip()) {  // the root's block in place: the bytes `send` would carry
      const int64_t at = x.root * x.n * x.rt.extent;
      std::copy(send.begin(), send.begin() + x.n * x.rt.extent, got.begin() + at);
      std::copy(send.begin(), send.begin() + x.n * x.rt.extent, ref.begin() + at);
    }
    const void* s = x.ip() ? MPI_IN_PLACE : send.data();
    EXPECT_EQ(on_device([&](void* sd, void* r) { return MPI_Gather(x.ip() ? MPI_IN_PLACE : sd, c, x.st.type, r, c, x.rt.type, x.root, e.comm); },
                        send, got),
              MPI_SUCCESS) << what;
    EXPECT_EQ(PMPI_Gather(s, c, x.st.type, ref.data(), c, x.rt.type, x.root, e.comm), MPI_SUCCESS) << what;
    EXPECT_TRUE(got == ref) << what << ": differs from PMPI_Gather on rank " << e.rank;
  });
}

TEST(CollMovement, Scatter) {
  each_rooted([](const Rooted& x) {
    const Env& e = x.e;
    const std::string what = x.what("scatter");
    const int c = static_cast<int>(x.n);
    // The root's send buffer holds every block; the others' is never read.
    std::vector<char> send = pattern(x.n * x.st.extent * e.size, 3 + e.rank), send_ref = send;
    std::vector<char> got = pattern(x.n * x.rt.extent, 60 + e.rank), ref = got;
    void* r_ref = x.ip() ? MPI_IN_PLACE : ref.data();
    EXPECT_EQ(on_device([&](void* sd, void* rd) { return MPI_Scatter(sd, c, x.st.type, x.ip() ? MPI_IN_PLACE : rd, c, x.rt.type, x.root, e.comm); },
                        send, got),
              MPI_SUCCESS) << what;
    EXPECT_EQ(PMPI_Scatter(send_ref.data(), c, x.st.type, r_ref, c, x.rt.type, x.root, e.comm), MPI_SUCCESS) << what;
    EXPECT_TRUE(got == ref) << what << ": differs from PMPI_Scatter on rank " << e.rank;
    EXPECT_TRUE(send == send_ref) << what << ": the send buffer changed on rank " << e.rank;
  });
}

// A barrier cannot be checked for timing here (no timing assertions); check that messages sent
// before it are all visible after it when the sender waited for them, and that it never errs.
TEST(CollMovement, Barrier) {
  for (const Env& e : comms())
    for (int k = 0; k < 20; ++k) {
      int token = e.rank + k, got = -1;
      MPI_Request rq;
      PMPI_Irecv(&got, 1, MPI_INT, (e.rank + e.size - 1) % e.size, 7, e.comm, &rq);
      PMPI_Send(&token, 1, MPI_INT, (e.rank + 1) % e.size, 7, e.comm);
      EXPECT_EQ(MPI_Barrier(e.comm), MPI_SUCCESS);
      PMPI_Wait(&rq, MPI_STATUS_IGNORE);
      EXPECT_EQ(got, (e.rank + e.size - 1) % e.size + k);
    }
}

}  // namespace
