// Point-to-point messages of the random datatypes of tests/dtype/typegen between (simulated)
// device buffers through libhier: rank 0 sends from device memory, rank 1 receives into device
// memory, blocking and nonblocking in turn; every third type also MPI_Sendrecv and
// MPI_Sendrecv_replace on both ranks, and where the MPI has them (MPI 4) the _c forms. What rank 1's buffer holds afterwards, holes
// included, must be what PMPI_Send / PMPI_Recv of the same data between host buffers leave,
// also for a short message (one element fewer than the receive asks for), and the status must
// count the same elements. Which path ran (the GPU module's kernels, or staged copies) is the
// variant's business (tests/device/CMakeLists.txt); the report check says which one did.
//   HIER_TEST_NTYPES  random datatypes (default 300), HIER_TEST_SEED their seed
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "dtype/canon.hpp"
#include "../support/world.hpp"
#include "dev_buffer.hpp"
#include "reference.hpp"
#include "typegen.hpp"

namespace hier::test {
namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : dflt;
}

using hier::test::rank_;

// One message of `sent` elements of t into a receive of `count`, checked on rank 1.
void exchange(MPI_Datatype t, int count, int sent, bool nonblocking, const std::string& desc, uint64_t seed) {
  MPI_Count size, lb, ext, tlb, text;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_extent_x(t, &lb, &ext);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  const int64_t e_last = (count - 1) * ext;
  const int64_t lo = std::min<int64_t>(tlb, tlb + e_last), hi = std::max<int64_t>(tlb + text, tlb + e_last + text);
  const int64_t pad = 16, origin = pad - lo;
  std::mt19937_64 rng(seed);  // the same bytes on both ranks
  std::vector<char> src(static_cast<size_t>(hi - lo + 2 * pad)), background(src.size());
  for (char& x : src) x = static_cast<char>(rng());
  for (char& x : background) x = static_cast<char>(rng());
  const int tag = 7;
  if (rank_() == 0) {
    ASSERT_EQ(PMPI_Send(src.data() + origin, sent, t, 1, tag, MPI_COMM_WORLD), MPI_SUCCESS);
    Dev d(src);
    if (nonblocking) {
      MPI_Request r;
      ASSERT_EQ(MPI_Isend(d.p + origin, sent, t, 1, tag, MPI_COMM_WORLD, &r), MPI_SUCCESS) << desc;
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Send(d.p + origin, sent, t, 1, tag, MPI_COMM_WORLD), MPI_SUCCESS) << desc;
    }
    return;
  }
  std::vector<char> want(background);
  MPI_Status st;
  ASSERT_EQ(PMPI_Recv(want.data() + origin, count, t, 0, tag, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  int want_n = -1, got_n = -2;
  PMPI_Get_count(&st, t, &want_n);
  Dev out(background);
  if (nonblocking) {
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(out.p + origin, count, t, 0, tag, MPI_COMM_WORLD, &r), MPI_SUCCESS) << desc;
    ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Recv(out.p + origin, count, t, 0, tag, MPI_COMM_WORLD, &st), MPI_SUCCESS) << desc;
  }
  PMPI_Get_count(&st, t, &got_n);
  EXPECT_EQ(got_n, want_n) << desc;
  EXPECT_EQ(out.get(), want) << (nonblocking ? "MPI_Irecv" : "MPI_Recv") << " of " << sent << " of " << count
                             << " elements into device memory differs: " << desc;
}

// The span of `count` elements of t with `pad` bytes each side: its size and element 0's offset.
struct Span {
  int64_t bytes, origin;
};
Span span_of(MPI_Datatype t, int count) {
  MPI_Count lb, ext, tlb, text;
  PMPI_Type_get_extent_x(t, &lb, &ext);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  const int64_t e_last = (count - 1) * ext, pad = 16;
  const int64_t lo = std::min<int64_t>(tlb, tlb + e_last), hi = std::max<int64_t>(tlb + text, tlb + e_last + text);
  return {hi - lo + 2 * pad, pad - lo};
}

std::vector<char> random_bytes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> v(static_cast<size_t>(n));
  for (char& x : v) x = static_cast<char>(rng());
  return v;
}

// Both ranks at once: MPI_Sendrecv from device memory into device memory (each rank sends
// `sent` elements to the other and receives up to `count`), then MPI_Sendrecv_replace of
// `count` elements in one device buffer; against the same calls of PMPI between host buffers.
// large: their MPI 4 _c forms (MPI_Count counts).
void exchange_both(MPI_Datatype t, int count, int sent, bool large, const std::string& desc, uint64_t seed) {
  const int me = rank_(), peer = 1 - me, tag = 8;
  const Span sp = span_of(t, count);
  const std::vector<char> mine = random_bytes(sp.bytes, seed * 2 + me), background = random_bytes(sp.bytes, seed * 7 + 3);
  std::vector<char> want(background);
  MPI_Status st;
  ASSERT_EQ(PMPI_Sendrecv(mine.data() + sp.origin, sent, t, peer, tag, want.data() + sp.origin, count, t, peer, tag,
                          MPI_COMM_WORLD, &st), MPI_SUCCESS);
  int want_n = -1, got_n = -2;
  PMPI_Get_count(&st, t, &want_n);
  Dev in(mine), out(background);
  int rc = MPI_ERR_OTHER;
  const char* call = large ? "MPI_Sendrecv_c" : "MPI_Sendrecv";
  if (!large) {
    rc = MPI_Sendrecv(in.p + sp.origin, sent, t, peer, tag, out.p + sp.origin, count, t, peer, tag, MPI_COMM_WORLD, &st);
  } else {
#if MPI_VERSION >= 4
    rc = MPI_Sendrecv_c(in.p + sp.origin, sent, t, peer, tag, out.p + sp.origin, count, t, peer, tag, MPI_COMM_WORLD, &st);
#endif
  }
  ASSERT_EQ(rc, MPI_SUCCESS) << call << ": " << desc;
  PMPI_Get_count(&st, t, &got_n);
  EXPECT_EQ(got_n, want_n) << call << ": " << desc;
  EXPECT_EQ(out.get(), want) << call << " of " << sent << " of " << count << " elements into device memory differs: " << desc;
  EXPECT_EQ(in.get(), mine) << call << " changed its send buffer: " << desc;

  std::vector<char> rwant(mine);
  ASSERT_EQ(PMPI_Sendrecv_replace(rwant.data() + sp.origin, count, t, peer, tag, peer, tag, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  PMPI_Get_count(&st, t, &want_n);
  Dev io(mine);
  call = large ? "MPI_Sendrecv_replace_c" : "MPI_Sendrecv_replace";
  if (!large) {
    rc = MPI_Sendrecv_replace(io.p + sp.origin, count, t, peer, tag, peer, tag, MPI_COMM_WORLD, &st);
  } else {
#if MPI_VERSION >= 4
    rc = MPI_Sendrecv_replace_c(io.p + sp.origin, count, t, peer, tag, peer, tag, MPI_COMM_WORLD, &st);
#endif
  }
  ASSERT_EQ(rc, MPI_SUCCESS) << call << ": " << desc;
  PMPI_Get_count(&st, t, &got_n);
  EXPECT_EQ(got_n, want_n) << call << ": " << desc;
  EXPECT_EQ(io.get(), rwant) << call << " of " << count << " elements in device memory differs: " << desc;
}

#if MPI_VERSION >= 4
// MPI_Send_c / MPI_Isend_c from rank 0's device memory into MPI_Recv_c / MPI_Irecv_c on rank 1's,
// against PMPI_Send / PMPI_Recv between host buffers (what arrives and the status's count).
void exchange_large(MPI_Datatype t, int count, int sent, bool nonblocking, const std::string& desc, uint64_t seed) {
  const Span sp = span_of(t, count);
  const std::vector<char> src = random_bytes(sp.bytes, seed), background = random_bytes(sp.bytes, seed + 5);
  const int tag = 9;
  if (rank_() == 0) {
    ASSERT_EQ(PMPI_Send(src.data() + sp.origin, sent, t, 1, tag, MPI_COMM_WORLD), MPI_SUCCESS);
    Dev d(src);
    if (nonblocking) {
      MPI_Request r;
      ASSERT_EQ(MPI_Isend_c(d.p + sp.origin, sent, t, 1, tag, MPI_COMM_WORLD, &r), MPI_SUCCESS) << desc;
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Send_c(d.p + sp.origin, sent, t, 1, tag, MPI_COMM_WORLD), MPI_SUCCESS) << desc;
    }
    return;
  }
  std::vector<char> want(background);
  MPI_Status st;
  ASSERT_EQ(PMPI_Recv(want.data() + sp.origin, count, t, 0, tag, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  MPI_Count want_n = -1, got_n = -2;
  PMPI_Get_count_c(&st, t, &want_n);
  Dev out(background);
  if (nonblocking) {
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv_c(out.p + sp.origin, count, t, 0, tag, MPI_COMM_WORLD, &r), MPI_SUCCESS) << desc;
    ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Recv_c(out.p + sp.origin, count, t, 0, tag, MPI_COMM_WORLD, &st), MPI_SUCCESS) << desc;
  }
  PMPI_Get_count_c(&st, t, &got_n);
  EXPECT_EQ(got_n, want_n) << desc;
  EXPECT_EQ(out.get(), want) << (nonblocking ? "MPI_Irecv_c" : "MPI_Recv_c") << " of " << sent << " of " << count
                             << " elements into device memory differs: " << desc;
}
#endif

// Whether t's typemap overlaps itself over `count` elements (erroneous to receive into).
bool overlaps(MPI_Datatype t, int count) {
  dtype::CanonRef c(dtype::canonicalize(t));
  if (!c->ok) return true;  // no program to walk: left out
  MPI_Count tlb, text, lb, ext;
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  PMPI_Type_get_extent_x(t, &lb, &ext);
  const int64_t lo = std::min<int64_t>(tlb, tlb + (count - 1) * ext);
  const int64_t hi = std::max<int64_t>(tlb + text, tlb + (count - 1) * ext + text);
  std::vector<uint8_t> cover(static_cast<size_t>(hi - lo), 0);
  bool overlap = false;
  walk(c->view, count, [&](int64_t o, int64_t len) {
    for (int64_t k = 0; k < len; ++k) overlap |= cover[o - lo + k]++ != 0;
  });
  return overlap;
}

TEST(DeviceP2p, RandomTypes) {
  TypeGen gen(static_cast<uint64_t>(env_int("HIER_TEST_SEED", 77)), GenOptions{3, 4096, 64 * 1024, true});
  const int64_t n = env_int("HIER_TEST_NTYPES", 300);
  const int counts[] = {1, 3, 2, 7};
  int any = 0;  // a failure on either rank, agreed after each type: both ranks stop together
  for (int64_t i = 0; i < n && !any; ++i) {
    std::string desc;
    MPI_Datatype t = gen.next(desc);
    const int count = counts[i % 4];
    MPI_Count size;
    PMPI_Type_size_x(t, &size);
    if (size > 0 && !overlaps(t, count)) {
      exchange(t, count, count, i % 2 == 1, desc, static_cast<uint64_t>(i));
      if (count > 1) exchange(t, count, count - 1, i % 2 == 0, desc + " (short)", static_cast<uint64_t>(i) + 1000000);
      // Every third type also through the calls with two buffers (and the _c forms where the
      // MPI has them), a short message every other time.
      if (i % 3 == 0) {
        const bool large = MPI_VERSION >= 4 && i % 2 == 1;
        exchange_both(t, count, count > 1 && i % 2 == 0 ? count - 1 : count, large, desc, static_cast<uint64_t>(i) + 2000000);
#if MPI_VERSION >= 4
        exchange_large(t, count, count > 1 && i % 4 == 3 ? count - 1 : count, i % 6 == 3, desc, static_cast<uint64_t>(i) + 3000000);
#endif
      }
    }
    free_type(t);
    int failed = HasFailure() ? 1 : 0;
    PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  EXPECT_EQ(any, 0) << "the other rank failed";
}

}  // namespace
}  // namespace hier::test
