// Prints, from rank 0, a hash of every rank's result bytes for quantized MPI_Allreduce,
// MPI_Reduce_scatter_block and MPI_Allgather (float32 and float64, several counts, in place and
// not): run under HIER_SHM=off and HIER_SHM=on, the two outputs must be the same text
// (CMakeLists.txt compares them): the node steps through shared memory give the bits the
// message steps give where they fold in the same order (the direct reduce-scatter's: counts
// above the model's direct_reduce_scatter_from; HIER_CHUNK=0 keeps one schedule shape).
// The inputs vary in sign and magnitude, so a reordered sum changes bits.
// TEST_ON_DEVICE=1: each call on simulated device buffers (tests/support/on_device.hpp), whose
// output must be the host run's, bit for bit (coll.quant_same_bits_device.*).
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../support/on_device.hpp"

namespace {

using hier::test::on_device;

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

template <class T>
T value(int rank, int64_t i) {
  const double x = std::sin(0.61 * static_cast<double>(i) + 1.7 * rank) * std::ldexp(1.0, static_cast<int>((i * 7 + rank) % 23) - 11);
  return static_cast<T>(x);
}

// Every rank's hash of `out`, combined in rank order, printed by rank 0 with the case's name.
void report(const char* name, const void* out, size_t bytes, int rank, int size) {
  uint64_t h = fnv(out, bytes);
  std::vector<uint64_t> all(static_cast<size_t>(size));
  PMPI_Gather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s %016llx\n", name, static_cast<unsigned long long>(fnv(all.data(), all.size() * 8)));
}

template <class T>
void run(MPI_Datatype type, const char* tname, int64_t n, int rank, int size) {
  char name[128];
  std::vector<T> in(static_cast<size_t>(n * size)), out(static_cast<size_t>(n * size));
  for (int64_t i = 0; i < n * size; ++i) in[static_cast<size_t>(i)] = value<T>(rank, i);
  for (bool in_place : {false, true}) {
    const char* ip = in_place ? "in_place" : "separate";
    // allreduce of n * size values
    out = in;
    if (in_place)
      on_device([&](void* o) { return MPI_Allreduce(MPI_IN_PLACE, o, static_cast<int>(n * size), type, MPI_SUM, MPI_COMM_WORLD); }, out);
    else
      on_device([&](void* i, void* o) { return MPI_Allreduce(i, o, static_cast<int>(n * size), type, MPI_SUM, MPI_COMM_WORLD); },
                in, out);
    std::snprintf(name, sizeof name, "allreduce %s %lld %s", tname, static_cast<long long>(n * size), ip);
    report(name, out.data(), out.size() * sizeof(T), rank, size);
    // reduce_scatter_block: n values each
    out = in;
    if (in_place)
      on_device([&](void* o) { return MPI_Reduce_scatter_block(MPI_IN_PLACE, o, static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD); },
                out);
    else
      on_device([&](void* i, void* o) { return MPI_Reduce_scatter_block(i, o, static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD); },
                in, out);
    std::snprintf(name, sizeof name, "reduce_scatter_block %s %lld %s", tname, static_cast<long long>(n), ip);
    report(name, out.data(), static_cast<size_t>(n) * sizeof(T), rank, size);
    // allgather: n values each
    if (in_place) {
      std::memcpy(out.data() + rank * n, in.data(), static_cast<size_t>(n) * sizeof(T));
      on_device([&](void* o) { return MPI_Allgather(MPI_IN_PLACE, 0, type, o, static_cast<int>(n), type, MPI_COMM_WORLD); }, out);
    } else {
      on_device([&](void* i, void* o) { return MPI_Allgather(i, static_cast<int>(n), type, o, static_cast<int>(n), type, MPI_COMM_WORLD); },
                in, out);
    }
    std::snprintf(name, sizeof name, "allgather %s %lld %s", tname, static_cast<long long>(n), ip);
    report(name, out.data(), out.size() * sizeof(T), rank, size);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Per rank: above the direct reduce-scatter's threshold (256 KiB of a node step's input) with
  // a prime count, and a larger one that takes several rounds of a segment slot.
  // QUANT_BITS_QUICK=1 (the device runs: the simulated device's streams are slow): the first only.
  const bool quick = std::getenv("QUANT_BITS_QUICK") != nullptr;
  for (int64_t n : {int64_t{65537}, int64_t{(1 << 19) + 3}}) {
    if (quick && n > 65537) break;
    run<float>(MPI_FLOAT, "float", n, rank, size);
    run<double>(MPI_DOUBLE, "double", n / 2, rank, size);
  }
  MPI_Finalize();
  return 0;
}
