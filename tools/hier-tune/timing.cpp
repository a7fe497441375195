// hier-tune's timing: repeated calls on one rank (seconds) and the slowest rank's time of a
// step every rank makes together (timed).
#include <algorithm>
#include <array>

#include "measure.hpp"

namespace hier::tune {

namespace {
double g_batch = 0.01;
}  // namespace

void set_batch(double batch_seconds) { g_batch = batch_seconds; }

double seconds(const std::function<void()>& fn) {
  fn();
  int reps = 1;
  for (;;) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    if (std::chrono::duration<double>(Clock::now() - t0).count() >= g_batch) break;
    reps *= 2;
  }
  std::array<double, 5> v{};
  for (double& x : v) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    x = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
  }
  std::sort(v.begin(), v.end());
  return v[2];
}

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double timed(MPI_Comm comm, int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    PMPI_Barrier(comm);
    const double t0 = now();
    fn();
    double dt = now() - t0, mx = 0;
    PMPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (r > 0) t.push_back(mx);
  }
  return median(t);
}

}  // namespace hier::tune
