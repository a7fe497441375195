// hier-tune's whole-communicator collectives: the MPI's own (flat_measured,
// flat_measured_nonblocking) and libhier's hierarchical schedules (hier_measured,
// hier_measured_nonblocking).
#include <link.h>

#include <cstring>

#include "measure.hpp"

namespace hier::tune {

Measured measure_colls(const Shape& s, bool quick, bool through_libhier, bool nonblocking) {
  const std::vector<int64_t> sizes = quick ? std::vector<int64_t>{64 << 10, 1 << 20}
                                           : std::vector<int64_t>{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  const int reps = quick ? 3 : 5;
  Measured out;
  const int64_t cap = sizes.back();
  std::vector<float> a(cap / 4 + s.size, 1.0f), b(cap / 4 + s.size, 0.0f);
  const bool lib = through_libhier;
  MPI_Request req = MPI_REQUEST_NULL;
  // A nonblocking call is timed from its start to the end of the MPI_Wait that follows at once
  // (what a program that overlaps nothing sees; the planner's figure for MPI_I*).
  auto wait = [&] { lib ? MPI_Wait(&req, MPI_STATUS_IGNORE) : PMPI_Wait(&req, MPI_STATUS_IGNORE); };
  auto run = [&](config::Coll c, const std::function<void(int64_t)>& call) {
    std::vector<model::Point>& pts = out[static_cast<size_t>(c)];
    for (int64_t n : sizes)
      pts.push_back({static_cast<double>(n), 1e9 * timed(MPI_COMM_WORLD, reps, [&] { call(n); })});
  };
  const MPI_Comm w = MPI_COMM_WORLD;
  run(config::Coll::Allreduce, [&](int64_t n) {
    const int c = static_cast<int>(n / 4);
    if (nonblocking) {
      lib ? MPI_Iallreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w, &req)
          : PMPI_Iallreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w, &req);
      wait();
    } else {
      lib ? MPI_Allreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w)
          : PMPI_Allreduce(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w);
    }
  });
  run(config::Coll::Allgather, [&](int64_t n) {  // n: the whole output
    const int c = static_cast<int>(n / 4 / s.size);
    if (nonblocking) {
      lib ? MPI_Iallgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, w, &req)
          : PMPI_Iallgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, w, &req);
      wait();
    } else {
      lib ? MPI_Allgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, w)
          : PMPI_Allgather(a.data(), c, MPI_FLOAT, b.data(), c, MPI_FLOAT, w);
    }
  });
  run(config::Coll::ReduceScatterBlock, [&](int64_t n) {  // n: the whole input
    const int c = static_cast<int>(n / 4 / s.size);
    if (nonblocking) {
      lib ? MPI_Ireduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w, &req)
          : PMPI_Ireduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w, &req);
      wait();
    } else {
      lib ? MPI_Reduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w)
          : PMPI_Reduce_scatter_block(a.data(), b.data(), c, MPI_FLOAT, MPI_SUM, w);
    }
  });
  run(config::Coll::Bcast, [&](int64_t n) {
    const int c = static_cast<int>(n / 4);
    if (nonblocking) {
      lib ? MPI_Ibcast(a.data(), c, MPI_FLOAT, 0, w, &req) : PMPI_Ibcast(a.data(), c, MPI_FLOAT, 0, w, &req);
      wait();
    } else {
      lib ? MPI_Bcast(a.data(), c, MPI_FLOAT, 0, w) : PMPI_Bcast(a.data(), c, MPI_FLOAT, 0, w);
    }
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
