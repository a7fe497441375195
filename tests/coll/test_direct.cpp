// The level collectives libhier runs itself (exec/direct.hpp: direct reduce-scatter, padded
// Allgatherv), called as functions on MPI_COMM_WORLD and compared element for element with the
// MPI's own collective on the same data: uneven pieces, empty pieces, gaps between pieces, in
// place or not, typed or bytes, blocking and nonblocking forms, and two of them in flight on one
// communicator at once (as in a pipelined wave). The planner picks these paths by size and MPI
// (sched/tuning.cpp: the padded Allgatherv only under MPICH), so the preloaded suites reach some
// of them under one MPI only; this test reaches all of them under both.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "exec/direct.hpp"

namespace hier::exec {
namespace {

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_of() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// Piece sizes: every third member contributes nothing, the others base + i.
std::vector<int> piece_counts(int p, int base) {
  std::vector<int> c(p);
  for (int i = 0; i < p; ++i) c[i] = i % 3 == 1 ? 0 : base + i;
  return c;
}
// Pieces laid out with a gap of 2 units after each, so that a write past a piece shows.
std::vector<int> gapped_displs(const std::vector<int>& c, int* total) {
  std::vector<int> d(c.size());
  int at = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    d[i] = at;
    at += c[i] + 2;
  }
  *total = at;
  return d;
}

// Allgatherv as a padded Allgather: typed, in place or not, and from both its blocking and its
// nonblocking form.
TEST(Direct, AllgathervPaddedTypedMatchesPmpi) {
  const int me = rank_of(), p = size_of();
  const TypeInfo ti = type_info(MPI_INT);
  for (int base : {0, 1, 7, 1000}) {
    for (bool in_place : {false, true}) {
      for (bool nonblocking : {false, true}) {
        const std::vector<int> counts = piece_counts(p, base);
        int total = 0;
        const std::vector<int> displs = gapped_displs(counts, &total);
        std::vector<int> mine(counts[me] + 1);
        for (int j = 0; j < counts[me]; ++j) mine[j] = me * 100000 + j;
        std::vector<int> want(total + 1, -1), got(total + 1, -1);
        if (in_place)
          for (int j = 0; j < counts[me]; ++j) got[displs[me] + j] = mine[j];
        ASSERT_EQ(PMPI_Allgatherv(mine.data(), counts[me], MPI_INT, want.data(), counts.data(), displs.data(),
                                  MPI_INT, MPI_COMM_WORLD),
                  MPI_SUCCESS);
        const char* src = in_place ? nullptr : reinterpret_cast<const char*>(mine.data());
        char* dst = reinterpret_cast<char*>(got.data());
        Scratch tmp;
        if (nonblocking) {
          Pending pd;
          ASSERT_EQ(allgatherv_padded_start(src, in_place, dst, counts, displs, &ti, MPI_COMM_WORLD, tmp, pd),
                    MPI_SUCCESS);
          ASSERT_EQ(pd.complete(), MPI_SUCCESS);
        } else {
          ASSERT_EQ(allgatherv_padded(src, in_place, dst, counts, displs, &ti, MPI_COMM_WORLD, tmp), MPI_SUCCESS);
        }
        EXPECT_EQ(got, want) << "base " << base << " in_place " << in_place << " nonblocking " << nonblocking;
      }
    }
  }
}

// Byte schedules (bcast, allgather) pass no type: units are bytes.
TEST(Direct, AllgathervPaddedBytesMatchesPmpi) {
  const int me = rank_of(), p = size_of();
  for (int base : {1, 13, 4099}) {
    const std::vector<int> counts = piece_counts(p, base);
    int total = 0;
    const std::vector<int> displs = gapped_displs(counts, &total);
    std::vector<char> mine(counts[me] + 1);
    for (int j = 0; j < counts[me]; ++j) mine[j] = static_cast<char>(me * 31 + j);
    std::vector<char> want(total + 1, 'x'), got(total + 1, 'x');
    ASSERT_EQ(PMPI_Allgatherv(mine.data(), counts[me], MPI_BYTE, want.data(), counts.data(), displs.data(), MPI_BYTE,
                              MPI_COMM_WORLD),
              MPI_SUCCESS);
    Scratch tmp;
    ASSERT_EQ(allgatherv_padded(mine.data(), false, got.data(), counts, displs, nullptr, MPI_COMM_WORLD, tmp),
              MPI_SUCCESS);
    EXPECT_EQ(got, want) << "base " << base;
  }
}

TEST(Direct, ReduceScatterMatchesPmpi) {
  const int me = rank_of(), p = size_of();
  const TypeInfo ti = type_info(MPI_INT);
  for (MPI_Op op : {MPI_SUM, MPI_MAX, MPI_BXOR}) {
    for (int base : {0, 1, 1000}) {
      const std::vector<int> counts = piece_counts(p, base);
      int n = 0;
      for (int c : counts) n += c;
      std::vector<int> src(n + 1);
      for (int j = 0; j < n; ++j) src[j] = (me + 1) * (j % 97) - 40 * me;
      std::vector<int> want(counts[me] + 1, -7), got(counts[me] + 1, -7);
      ASSERT_EQ(PMPI_Reduce_scatter(src.data(), want.data(), counts.data(), MPI_INT, op, MPI_COMM_WORLD), MPI_SUCCESS);
      Scratch tmp;
      ASSERT_EQ(reduce_scatter_direct(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(got.data()),
                                      counts, ti, op, MPI_COMM_WORLD, tmp),
                MPI_SUCCESS);
      EXPECT_EQ(got, want) << "base " << base;
    }
  }
}

// A pipelined wave runs a direct reduce-scatter of one chunk next to a padded allgather of
// another on the same level communicator: both must be right whichever is completed first.
TEST(Direct, ReduceScatterAndAllgathervInFlightTogether) {
  const int me = rank_of(), p = size_of();
  const TypeInfo ti = type_info(MPI_INT);
  const std::vector<int> rs_counts(p, 257);
  const std::vector<int> ag_counts = piece_counts(p, 129);
  int ag_total = 0;
  const std::vector<int> ag_displs = gapped_displs(ag_counts, &ag_total);
  std::vector<int> src(257 * p);
  for (size_t j = 0; j < src.size(); ++j) src[j] = static_cast<int>(j) * (me + 2);
  std::vector<int> piece(ag_counts[me] + 1);
  for (int j = 0; j < ag_counts[me]; ++j) piece[j] = -(me * 1000 + j);
  std::vector<int> rs_want(257), ag_want(ag_total, 0);
  ASSERT_EQ(PMPI_Reduce_scatter_block(src.data(), rs_want.data(), 257, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Allgatherv(piece.data(), ag_counts[me], MPI_INT, ag_want.data(), ag_counts.data(), ag_displs.data(),
                            MPI_INT, MPI_COMM_WORLD),
            MPI_SUCCESS);
  for (bool rs_first : {true, false}) {
    std::vector<int> rs_got(257, 0), ag_got(ag_total, 0);
    Scratch rs_tmp, ag_tmp;
    Pending rs, ag;
    ASSERT_EQ(reduce_scatter_direct_start(reinterpret_cast<const char*>(src.data()),
                                          reinterpret_cast<char*>(rs_got.data()), rs_counts, ti, MPI_SUM,
                                          MPI_COMM_WORLD, rs_tmp, rs),
              MPI_SUCCESS);
    ASSERT_EQ(allgatherv_padded_start(reinterpret_cast<const char*>(piece.data()), false,
                                      reinterpret_cast<char*>(ag_got.data()), ag_counts, ag_displs, &ti,
                                      MPI_COMM_WORLD, ag_tmp, ag),
              MPI_SUCCESS);
    if (rs_first) {
      ASSERT_EQ(rs.complete(), MPI_SUCCESS);
      ASSERT_EQ(ag.complete(), MPI_SUCCESS);
    } else {
      ASSERT_EQ(ag.complete(), MPI_SUCCESS);
      ASSERT_EQ(rs.complete(), MPI_SUCCESS);
    }
    EXPECT_EQ(rs_got, rs_want);
    EXPECT_EQ(ag_got, ag_want);
  }
}

}  // namespace
}  // namespace hier::exec
