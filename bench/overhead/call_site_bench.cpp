// The cost of diag::call_site (diag/call_site.hpp) alone, in one process: the fastest of 21
// blocks of 200,000 calls each (thread CPU time: the fastest block is the least disturbed by a
// loaded machine). Two cases:
//   program: a return address in an object of the program's (here libm's cos): one probe of the
//     cache of kinds, what every call of a C or C++ program pays;
//   walk: a return address in this executable, which links libhier's diag layer and so counts
//     as libhier itself: a libunwind walk of the whole stack (6 frames, none of the program's),
//     what a Fortran call pays (through libhier's Fortran wrapper or the MPI's binding: ~4 frames
//     to the program's).
// Usage: bench_call_site
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diag/call_site.hpp"

namespace {

double cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

__attribute__((noinline)) double fastest(const void* ra, int iters) {
  double best = 1e30;
  const void* volatile sink = nullptr;
  for (int b = 0; b < 21; ++b) {
    const double t0 = cpu_ns();
    for (int i = 0; i < iters; ++i) sink = hier::diag::call_site(ra);
    best = std::min(best, (cpu_ns() - t0) / iters);
  }
  (void)sink;
  return best;
}

}  // namespace

int main() {
  double (*libm_cos)(double) = &std::cos;
  const void* in_program = reinterpret_cast<const char*>(libm_cos) + 16;
  const void* in_libhier = reinterpret_cast<const char*>(&fastest) + 16;
  std::printf("call_site, program's return address (one probe): %6.1f ns per call\n", fastest(in_program, 200000));
  std::printf("call_site, libhier's return address (walk):        %6.1f ns per call\n", fastest(in_libhier, 20000));
  return 0;
}
