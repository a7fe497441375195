// MPI_Pack / MPI_Unpack through libhier with the typed buffer in (simulated) device memory, for
// the random datatypes of tests/dtype/typegen: the packed bytes must be PMPI_Pack's of the same
// data in host memory, with the packed side in device memory and in host memory; unpacking
// must write exactly what PMPI_Unpack writes, holes untouched. Which path ran (the GPU module's
// kernels, or copies staged through host memory) is the variant's business
// (tests/device/CMakeLists.txt); the report check says which one did.
//   HIER_TEST_NTYPES  random datatypes (default 400), HIER_TEST_SEED their seed
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "dtype/canon.hpp"
#include "dev_buffer.hpp"
#include "reference.hpp"
#include "typegen.hpp"

namespace hier::test {
namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : dflt;
}

void check(MPI_Datatype t, int count, const std::string& desc, std::mt19937_64& rng) {
  MPI_Count size, lb, ext, tlb, text;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_extent_x(t, &lb, &ext);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  if (size == 0) return;
  const int64_t e_last = (count - 1) * ext;
  const int64_t lo = std::min<int64_t>(tlb, tlb + e_last), hi = std::max<int64_t>(tlb + text, tlb + e_last + text);
  const int64_t pad = 16, origin = pad - lo;
  std::vector<char> src(static_cast<size_t>(hi - lo + 2 * pad));
  for (char& x : src) x = static_cast<char>(rng());
  const int need = static_cast<int>(count * size), off = 8, total = need + off + 8;

  std::vector<char> ref(static_cast<size_t>(total), 0x5a);
  int pos = off;
  ASSERT_EQ(PMPI_Pack(src.data() + origin, count, t, ref.data(), total, &pos, MPI_COMM_WORLD), MPI_SUCCESS);

  Dev typed(src);
  // Packed side in host memory, then in device memory.
  std::vector<char> host(static_cast<size_t>(total), 0x5a);
  pos = off;
  ASSERT_EQ(MPI_Pack(typed.p + origin, count, t, host.data(), total, &pos, MPI_COMM_WORLD), MPI_SUCCESS) << desc;
  EXPECT_EQ(pos, off + need) << desc;
  EXPECT_EQ(host, ref) << "MPI_Pack to host memory differs: " << desc << " count " << count;
  Dev packed(std::vector<char>(static_cast<size_t>(total), 0x5a));
  pos = off;
  ASSERT_EQ(MPI_Pack(typed.p + origin, count, t, packed.p, total, &pos, MPI_COMM_WORLD), MPI_SUCCESS) << desc;
  EXPECT_EQ(packed.get(), ref) << "MPI_Pack to device memory differs: " << desc << " count " << count;

  // Unpack, where the typemap does not overlap itself (erroneous to receive into).
  std::vector<uint8_t> cover(static_cast<size_t>(hi - lo), 0);
  bool overlap = false;
  dtype::CanonRef c(dtype::canonicalize(t));
  if (!c->ok) return;  // walk needs the program; the MPI handled the pack
  walk(c->view, count, [&](int64_t o, int64_t len) {
    for (int64_t k = 0; k < len; ++k) overlap |= cover[o - lo + k]++ != 0;
  });
  if (overlap) return;
  std::vector<char> background(src.size()), in(static_cast<size_t>(total));
  for (char& x : background) x = static_cast<char>(rng());
  for (char& x : in) x = static_cast<char>(rng());
  std::vector<char> want(background);
  pos = off;
  ASSERT_EQ(PMPI_Unpack(in.data(), total, &pos, want.data() + origin, count, t, MPI_COMM_WORLD), MPI_SUCCESS);
  for (bool from_device : {false, true}) {
    Dev out(background), din(in);
    pos = off;
    ASSERT_EQ(MPI_Unpack(from_device ? din.p : in.data(), total, &pos, out.p + origin, count, t, MPI_COMM_WORLD),
              MPI_SUCCESS);
    EXPECT_EQ(pos, off + need);
    EXPECT_EQ(out.get(), want) << "MPI_Unpack from " << (from_device ? "device" : "host") << " memory differs: " << desc;
  }
}

TEST(DevicePack, RandomTypes) {
  TypeGen gen(static_cast<uint64_t>(env_int("HIER_TEST_SEED", 99)), GenOptions{3, 4096, 64 * 1024, true});
  std::mt19937_64 rng(5);
  const int64_t n = env_int("HIER_TEST_NTYPES", 400);
  const int counts[] = {1, 3, 2, 5};
  for (int64_t i = 0; i < n && !HasFailure(); ++i) {
    std::string desc;
    MPI_Datatype t = gen.next(desc);
    check(t, counts[i % 4], desc, rng);
    free_type(t);
  }
}

}  // namespace
}  // namespace hier::test
