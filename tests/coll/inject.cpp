// The test side of libhier's failure injection (src/util/inject.hpp): linked into the collective
// test programs (and nonblocking_single) and exported from them, so that the libhier.so
// preloaded into them finds it.
//   HIER_TEST_FAIL=point@rank[#n][=throw],...   point: levels | plan | scratch | shm | device_scratch | device_stage | run
//   | p2p_progress | op_free | type_hold
// rank: a rank of MPI_COMM_WORLD, or * for every rank; #n: only the first n times the point is
// reached on that rank; =throw: throw std::bad_alloc there instead of failing.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

struct Rule {
  std::string point;
  int rank = -1;  // -1: every rank
  long limit = -1;
  bool throws = false;
  long hits = 0;
};

Rule g_rules[8];
int g_nrules = -1;

void parse() {
  g_nrules = 0;
  const char* env = std::getenv("HIER_TEST_FAIL");
  if (!env) return;
  std::string s(env);
  size_t pos = 0;
  while (pos < s.size() && g_nrules < 8) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    Rule r;
    if (auto eq = item.find('='); eq != std::string::npos) {
      r.throws = item.substr(eq + 1) == "throw";
      item.resize(eq);
    }
    if (auto h = item.find('#'); h != std::string::npos) {
      r.limit = std::atol(item.c_str() + h + 1);
      item.resize(h);
    }
    const size_t at = item.find('@');
    r.point = item.substr(0, at);
    if (at != std::string::npos && item.substr(at + 1) != "*") r.rank = std::atoi(item.c_str() + at + 1);
    g_rules[g_nrules++] = r;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int hier_test_inject(const char* point) {
  if (g_nrules < 0) parse();  // first use is inside MPI (initialized), on the rank's main thread
  int rank = -1;
  for (int i = 0; i < g_nrules; ++i) {
    Rule& r = g_rules[i];
    if (r.point != point) continue;
    if (r.rank >= 0) {
      if (rank < 0) PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank != r.rank) continue;
    }
    if (r.limit >= 0 && r.hits >= r.limit) continue;
    ++r.hits;
    if (r.throws) throw std::bad_alloc();
    return 1;
  }
  return 0;
}
