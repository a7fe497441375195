// 10,000 random derived datatypes (seeded), each packed three ways — PMPI_Pack (the MPI's own
// engine, the reference), MPI_Pack (through the preloaded libhier) and the engine's API
// directly — with identical bytes required, then unpacked back into the original layout.
// HIER_TEST_NTYPES / HIER_TEST_SEED override the count and the seed. TEST_ON_DEVICE=1 (the
// device_* variants): MPI_Pack / MPI_Unpack get both sides in simulated device memory
// (tests/support/on_device.hpp), so every layout is also packed and unpacked from the device.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dtype/canon.hpp"
#include "dtype/decode.hpp"
#include "dtype/engine.hpp"
#include "reference.hpp"
#include "typegen.hpp"
#include "../support/on_device.hpp"

namespace hier::test {
namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : dflt;
}

std::string form_of(MPI_Datatype t) {
  std::string why;
  auto s = dtype::decode(t, why);
  return s ? dtype::to_string(*s) : "unrepresentable: " + why;
}

struct Stats {
  int types = 0, representable = 0, overlapping = 0, failures = 0;
  int64_t bytes = 0;
  std::map<std::string, int> why;
};

// One type, `count` elements: returns false (and prints) on the first difference.
bool check(MPI_Datatype t, int count, const std::string& desc, std::mt19937_64& rng, Stats& st) {
  MPI_Count size, lb, ext, tlb, text;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_extent_x(t, &lb, &ext);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  auto fail = [&](const char* what) {
    if (++st.failures <= 10)
      ADD_FAILURE() << what << "\n  type: " << desc << "\n  count " << count << " size " << size << " extent " << ext
                    << " lb " << lb << " true_lb " << tlb << " true_extent " << text << "\n  form: " << form_of(t);
    return false;
  };
  if (size == 0) {  // nothing is touched (MPICH reports odd true bounds for these)
    char dummy[16] = {0}, out[16];
    int pa = 0, pb = 0;
    PMPI_Pack(dummy, count, t, out, sizeof out, &pa, MPI_COMM_WORLD);
    MPI_Pack(dummy, count, t, out, sizeof out, &pb, MPI_COMM_WORLD);
    if (pa != 0 || pb != 0) return fail("zero-size type packed bytes");
    dtype::CanonRef c(dtype::canonicalize(t));
    if (c->ok) ++st.representable;
    else st.why[c->why]++;
    return true;
  }
  // Bytes touched by `count` elements: [lo, hi) relative to the buffer address.
  const int64_t e_last = (count - 1) * ext;
  const int64_t lo = std::min<int64_t>(tlb, tlb + e_last), hi = std::max<int64_t>(tlb + text, tlb + e_last + text);
  const int64_t pad = 32;
  std::vector<char> src(static_cast<size_t>(hi - lo + 2 * pad));
  for (char& c : src) c = static_cast<char>(rng());
  char* base = src.data() + pad - lo;

  // Pack_size: libhier's answer must be the MPI's.
  int ps_ref = -1, ps_lib = -2;
  PMPI_Pack_size(count, t, MPI_COMM_WORLD, &ps_ref);
  MPI_Pack_size(count, t, MPI_COMM_WORLD, &ps_lib);
  if (ps_ref != ps_lib) return fail("MPI_Pack_size differs from PMPI_Pack_size");

  const int64_t need = count * size;
  const int off0 = 8;  // pack at a non-zero position
  std::vector<char> pa(need + off0 + 8, 0x5a), pb(pa), pc(pa), pd(pa);
  int posa = off0, posb = off0;
  PMPI_Pack(base, count, t, pa.data(), static_cast<int>(pa.size()), &posa, MPI_COMM_WORLD);
  on_device([&](void* from, void* to) {  // TEST_ON_DEVICE=1: both sides in device memory
    return MPI_Pack(static_cast<char*>(from) + (base - src.data()), count, t, to, static_cast<int>(pb.size()), &posb,
                    MPI_COMM_WORLD);
  }, src, pb);
  if (posa != off0 + need) return fail("PMPI_Pack position is not count * size");
  if (posb != posa) return fail("MPI_Pack position differs");
  if (pa != pb) return fail("MPI_Pack bytes differ from PMPI_Pack");

  dtype::CanonRef c(dtype::canonicalize(t));
  if (!c->ok) {
    st.why[c->why]++;
    if (std::getenv("HIER_TEST_VERBOSE")) std::fprintf(stderr, "passthrough (%s): %s\n", c->why.c_str(), desc.c_str());
    return true;
  }
  ++st.representable;
  st.bytes += need;
  dtype::pack(*c, base, count, pc.data() + off0);
  if (pa != pc) return fail("engine pack differs from PMPI_Pack");
  // The reference walker agrees too (checks the block program itself, not just the fast path).
  int64_t at = off0;
  walk(c->view, count, [&](int64_t o, int64_t len) {
    std::memcpy(pd.data() + at, base + o, static_cast<size_t>(len));
    at += len;
  });
  if (pa != pd) return fail("reference walk differs from PMPI_Pack");

  // Unpack. Overlapping typemaps (legal to pack, erroneous to receive into) are only packed.
  std::vector<uint8_t> cover(static_cast<size_t>(hi - lo), 0);
  bool overlap = false;
  walk(c->view, count, [&](int64_t o, int64_t len) {
    for (int64_t k = 0; k < len; ++k) overlap |= cover[o - lo + k]++ != 0;
  });
  if (overlap) {
    ++st.overlapping;
    return true;
  }
  std::vector<char> pattern(src.size());
  for (char& x : pattern) x = static_cast<char>(rng());
  std::vector<char> ua(pattern), ub(pattern), uc(pattern), ud(pattern);
  auto at_base = [&](std::vector<char>& v) { return v.data() + pad - lo; };
  int qa = off0, qb = off0;
  PMPI_Unpack(pa.data(), static_cast<int>(pa.size()), &qa, at_base(ua), count, t, MPI_COMM_WORLD);
  std::vector<char> packed(pa);  // (not pa itself: a copy back would hide a write into it)
  on_device([&](void* from, void* to) {
    return MPI_Unpack(from, static_cast<int>(packed.size()), &qb, static_cast<char*>(to) + pad - lo, count, t,
                      MPI_COMM_WORLD);
  }, packed, ub);
  if (packed != pa) return fail("MPI_Unpack wrote into its packed input");
  dtype::unpack(*c, pa.data() + off0, count, at_base(uc));
  if (qa != qb) return fail("MPI_Unpack position differs");
  if (ua != ub) return fail("MPI_Unpack result differs from PMPI_Unpack");
  if (ua != uc) return fail("engine unpack differs from PMPI_Unpack");
  for (int64_t k = 0; k < hi - lo; ++k) {
    const size_t i = static_cast<size_t>(pad + k);
    if (ua[i] != (cover[k] ? src[i] : pattern[i])) return fail("unpack(pack(x)) is not x on the typemap");
  }
  // A short message: only a prefix of the packed bytes arrives.
  if (need > 1) {
    const int64_t bytes = std::uniform_int_distribution<int64_t>(1, need - 1)(rng);
    int64_t left = bytes;
    const char* in = pa.data() + off0;
    walk(c->view, count, [&](int64_t o, int64_t len) {
      const int64_t n = std::min(len, left);
      if (n > 0) std::memcpy(at_base(ud) + o, in, static_cast<size_t>(n));
      in += n;
      left -= n;
    });
    std::vector<char> ue(pattern);
    dtype::unpack_prefix(*c, pa.data() + off0, bytes, count, at_base(ue));
    if (ud != ue) return fail("prefix unpack differs from the reference");
  }
  return true;
}

TEST(DtypeRandom, PackUnpackMatchPMPI) {
  const int64_t n = env_int("HIER_TEST_NTYPES", 10000);
  const uint64_t seed = static_cast<uint64_t>(env_int("HIER_TEST_SEED", 20240611));
  TypeGen gen(seed);
  Stats st;
  for (int64_t i = 0; i < n && st.failures < 10; ++i) {
    std::string desc;
    MPI_Datatype t = gen.next(desc);
    const int count = static_cast<int>(std::uniform_int_distribution<int>(1, 3)(gen.rng()));
    if (std::getenv("HIER_TEST_VERBOSE")) std::fprintf(stderr, "type %lld: %s x%d\n", static_cast<long long>(i), desc.c_str(), count);
    check(t, count, desc, gen.rng(), st);
    ++st.types;
    free_type(t);
  }
  std::printf("[dtype] seed %llu: %d types, %d representable, %d overlapping (pack only), %lld bytes packed\n",
              static_cast<unsigned long long>(seed), st.types, st.representable, st.overlapping,
              static_cast<long long>(st.bytes));
  for (auto& [why, k] : st.why) std::printf("[dtype]   passed through (%d): %s\n", k, why.c_str());
  EXPECT_EQ(st.failures, 0);
  // Every constructor the generator uses is decodable. Types go to the MPI only for the
  // documented reasons (the MPI's behaviour deviates from a plain copy of the typemap), and those
  // stay a small minority.
  for (auto& [why, k] : st.why)
    EXPECT_TRUE(why == "long double (MPICH packs its 10 significant bytes)" ||
                why == "the MPI's true extent disagrees with the typemap" ||
                why == "zero-length members the MPI packs differently")
        << why;
  EXPECT_GE(st.representable, st.types * 8 / 10);
}

}  // namespace
}  // namespace hier::test
