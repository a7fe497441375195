// HIER_TRACE's cost per recorded step: the two clock reads and the store the executor makes per
// step (diag::trace::step), timed in blocks that stay inside one thread's buffer (kCapacity).
// One process, no MPI calls (MPI is initialized only because the trace's lifecycle lives there).
//   build/<mpi>/bench/trace/bench_trace_record [blocks] [steps per block]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "diag/trace.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  namespace tr = hier::diag::trace;
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 5;
  const int per = argc > 2 ? std::atoi(argv[2]) : 5000;
  if (blocks * per > static_cast<int>(tr::kCapacity)) {
    std::fprintf(stderr, "blocks x steps must stay within %zu events\n", tr::kCapacity);
    return 2;
  }
  tr::g_on = true;  // the flag alone: nothing is written (no trace_finalize)
  tr::StepInfo s;
  s.kind = "ReduceScatter";
  s.level = "node";
  s.group = 4;
  s.bytes = 1 << 20;
  s.via = tr::Transport::ShmSingleCopy;
  std::vector<double> off, on;
  for (int b = 0; b < blocks; ++b) {
    // off: the two clock reads the executor makes per step anyway only when tracing, so "off"
    // is the loop with the flag test alone
    uint64_t t0 = tr::now_ns();
    volatile int sink = 0;
    for (int i = 0; i < per; ++i)
      if (__builtin_expect(!tr::g_on, 0)) sink = sink + 1;
    off.push_back(static_cast<double>(tr::now_ns() - t0) / per);
    t0 = tr::now_ns();
    for (int i = 0; i < per; ++i) {
      const uint64_t a = tr::now_ns();
      s.kernel_ns = i;
      tr::step(1, s, a, tr::now_ns());
    }
    on.push_back(static_cast<double>(tr::now_ns() - t0) / per);
  }
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  std::printf("per step: recorded %.1f ns (median of %d blocks of %d; min %.1f, max %.1f), flag test alone %.1f ns\n",
              on[on.size() / 2], blocks, per, on.front(), on.back(), off[off.size() / 2]);
  tr::g_on = false;
  MPI_Finalize();
  return 0;
}
