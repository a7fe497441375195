// hier-tune's whole-communicator collectives: the MPI's own (flat_measured) and libhier's
// hierarchical schedules (hier_measured).
#include <link.h>

#include <cstring>

#include "measure.hpp"

namespace hier::tune {

json measure_colls(const Shape& s, bool quick, bool through_libhier) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{64 << 10, 1 << 20}
                                           : std::vector<int64_t>{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  const int reps = quick ? 3 : 5;
  json out = json::object();
  const int64_t cap = sizes.back();
  std::vector<float> a(cap / 4 + s.size, 1.0f), b(cap / 4 + s.size, 0.0f);
  const bool lib = through_libhier;
  auto run = [&](const char* name, const std::function<void(int64_t)>& call) {
    json pts = json::array();
    for (int64_t n : sizes) {
      const double t = timed(MPI_COMM_WORLD, reps, [&] { call(n); });
      pts.push_back({{"bytes", n}, {"ns", 1e9 * t}});
    }
    out[name] = pts;
  };
  run("allreduce", [&](int64_t n) {
    const int c = static_cast<int>(n / 4);
    lib ? MPI_Allreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
        : PMPI_Allreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  run("allgather", [&](int64_t n) {  // n: the whole output
    const int c = static_cast<int>(n / 4 / s.size);
    lib ? MPI_Allgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, MPI_COMM_WORLD)
        : PMPI_Allgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, MPI_COMM_WORLD);
  });
  run("reduce_scatter_block", [&](int64_t n) {  // n: the whole input
    const int c = static_cast<int>(n / 4 / s.size);
    lib ? MPI_Reduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
        : PMPI_Reduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  run("bcast", [&](int64_t n) {
    const int c = static_cast<int>(n / 4);
    lib ? MPI_Bcast(a.data(), c, MPI_FLOAT, 0, MPI_COMM_WORLD) : PMPI_Bcast(a.data(), c, MPI_FLOAT, 0, MPI_COMM_WORLD);
  });
  return out;
}

// Whether libhier.so is loaded in this process (preloaded by hier-run or LD_PRELOAD).
bool libhier_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
        name = name ? name + 1 : info->dlpi_name;
        if (name && std::strncmp(name, "libhier.so", 10) == 0) *static_cast<bool*>(data) = true;
        return 0;
      },
      &found);
  return found;
}

}  // namespace hier::tune
