// The node reduce-scatter alone (issue 26's single-node benchmark): every rank of MPI_COMM_WORLD
// (one node) reduces COUNT float32 values (16 MiB by default) with MPI_SUM, each keeping
// COUNT / P, four ways alternated in every repetition:
//   mpi     the MPI's MPI_Reduce_scatter_block (its shared-memory transport);
//   direct  libhier's message form of the step (exec/direct.hpp: what the executor runs at this
//           size with HIER_SHM=off);
//   copyin  the step through the segment, copied in and out (exec/shm_steps.cpp);
//   single  the step through the segment, single copy (process_vm_readv), where the kernel
//           allows it (skipped otherwise).
// Each timed sample is ITERS calls between barriers, the slowest rank's time per call; prints
// the median and the spread of REPS samples per form, the ratio of each to `direct`, and checks
// every form's result against the MPI's bit for bit (integer-valued floats: exact sums).
//   mpiexec -n 4 build/openmpi/bench/shm/bench_shm_rs [COUNT=4194304] [REPS=7] [ITERS=5]
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "exec/direct.hpp"
#include "exec/scratch.hpp"
#include "exec/shm_steps.hpp"
#include "exec/typed.hpp"
#include "shm/cma.hpp"
#include "shm/segment.hpp"
#include "shm/step.hpp"
#include "shm/wait.hpp"

namespace {

struct Form {
  const char* name;
  std::function<int()> run;
  std::vector<double> ms;
  double waits = 0;  // yields and naps of the flag waits, per call, summed over the samples
};

// One sample: ms per call (the slowest rank's); adds the flag waits' yields and naps per call
// (the mean over ranks) to *waits.
double sample_ms(const std::function<int()>& run, int iters, double* waits) {
  PMPI_Barrier(MPI_COMM_WORLD);
  const hier::shm::WaitCounts w0 = hier::shm::wait_counts();
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    if (run() != MPI_SUCCESS) std::abort();
  double v[2] = {(MPI_Wtime() - t0) * 1e3 / iters, 0};
  const hier::shm::WaitCounts w1 = hier::shm::wait_counts();
  v[1] = static_cast<double>(w1.yields - w0.yields + w1.naps - w0.naps) / iters;
  PMPI_Allreduce(MPI_IN_PLACE, &v[0], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  PMPI_Allreduce(MPI_IN_PLACE, &v[1], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  *waits += v[1] / p;
  return v[0];
}

}  // namespace

int main(int argc, char** argv) {
  // The single form is single copy wherever the kernel allows (not the model's choice, which
  // needs a tune file's measured rate: HIER_SHM_CMA=auto).
  setenv("HIER_SHM_CMA", "on", 0);
  MPI_Init(&argc, &argv);
  const int64_t count = argc > 1 ? std::atoll(argv[1]) : int64_t{4} << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 5;
  int rank = 0, p = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  const int piece = static_cast<int>(count / p);
  bool failed = false;
  auto seg = hier::shm::open_segment(MPI_COMM_WORLD, hier::shm::kHalfBytes, &failed);
  int bad = failed ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) {
    if (rank == 0) std::fprintf(stderr, "bench_shm_rs: no segment (ranks on several nodes?)\n");
    MPI_Finalize();
    return 1;
  }
  seg->unlink_name();
  std::vector<float> in(static_cast<size_t>(piece) * p), out(static_cast<size_t>(piece)), want(out.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((rank * 7 + static_cast<int>(i % 13)) % 17);
  const std::vector<int> counts(p, piece);
  const hier::exec::TypeInfo info = hier::exec::type_info(MPI_FLOAT);
  hier::exec::Scratch tmp;
  auto shm_form = [&](bool single) {
    hier::exec::ShmArgs a{reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()), false, 0, 0,
                          std::vector<int64_t>(p, piece), {}, &info, MPI_SUM, single};
    return [&, a] {
      auto st = hier::exec::shm_start(hier::sched::Kind::ReduceScatter, *seg, a);
      return st ? hier::shm::finish(*st) : MPI_ERR_OTHER;
    };
  };
  std::vector<Form> forms = {
      {"mpi", [&] { return PMPI_Reduce_scatter_block(in.data(), out.data(), piece, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }, {}},
      {"direct", [&] {
         return hier::exec::reduce_scatter_direct(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                                                  counts, info, MPI_SUM, MPI_COMM_WORLD, tmp);
       }, {}},
      {"copyin", shm_form(false), {}},
  };
  // Where the single-copy step's time goes: its kernel reads alone (every rank reads its piece
  // of every peer's input, 128 KiB at a time, as the step does) and its folds alone (the same
  // p-1 folds of a piece from a cache-sized buffer), each between barriers like the forms.
  struct Peer {
    long long pid, addr;
  };
  Peer me_{static_cast<long long>(getpid()), reinterpret_cast<long long>(in.data())};
  std::vector<Peer> peers(p);
  PMPI_Allgather(&me_, 2, MPI_LONG_LONG, peers.data(), 2, MPI_LONG_LONG, MPI_COMM_WORLD);
  const int chunk = std::getenv("BENCH_CHUNK") ? std::atoi(std::getenv("BENCH_CHUNK")) : 32768;  // floats: 128 KiB, the step's chunk
  std::vector<float> buf(chunk);
  std::vector<Form> parts = {
      {"reads", [&] {
         for (int off = 0; off < piece; off += chunk)
           for (int d = 1; d < p; ++d) {
             const Peer& q = peers[(rank - d + p) % p];
             const auto* at = reinterpret_cast<const float*>(q.addr) + static_cast<int64_t>(rank) * piece + off;
             if (!hier::shm::cma_read(static_cast<pid_t>(q.pid), at, buf.data(), sizeof(float) * std::min(chunk, piece - off)))
               return MPI_ERR_OTHER;
           }
         return MPI_SUCCESS;
       }, {}},
      {"folds", [&] {
         for (int off = 0; off < piece; off += chunk)
           for (int d = 1; d < p; ++d)
             PMPI_Reduce_local(buf.data(), out.data() + off, std::min(chunk, piece - off), MPI_FLOAT, MPI_SUM);
         return MPI_SUCCESS;
       }, {}},
  };
  if (seg->cma()) forms.push_back({"single", shm_form(true), {}});
  // The same two, their waits yielding (the nap of the old policy) instead of sleeping on the bell.
  auto yielding = [](std::function<int()> f) {
    return [f] {
      hier::shm::set_yields_before_sleep(UINT64_MAX / 2);
      const int rc = f();
      hier::shm::set_yields_before_sleep(64);
      return rc;
    };
  };
  forms.push_back({"copyin-y", yielding(shm_form(false)), {}});
  if (seg->cma()) forms.push_back({"single-y", yielding(shm_form(true)), {}});
  else if (rank == 0) std::printf("# no single copy between these ranks (process_vm_readv refused)\n");
  // Every form's result against the MPI's, bit for bit.
  forms[0].run();
  want = out;
  int wrong = 0;
  for (Form& f : forms) {
    std::fill(out.begin(), out.end(), -1.0f);
    f.run();
    if (std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "rank %d: %s differs from MPI_Reduce_scatter_block\n", rank, f.name);
      wrong = 1;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  for (int r = 0; r < reps; ++r)
    for (Form& f : forms) f.ms.push_back(sample_ms(f.run, iters, &f.waits));
  if (seg->cma())
    for (int r = 0; r < reps; ++r)
      for (Form& f : parts) f.ms.push_back(sample_ms(f.run, iters, &f.waits));
  if (rank == 0) {
    std::printf("# bench_shm_rs: %d ranks, %lld float32 in (%.1f MiB), %d reps x %d calls: ms per call, median [min max]\n",
                p, static_cast<long long>(count), count * 4.0 / (1 << 20), reps, iters);
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    const double base = med(forms[1].ms);
    for (Form& f : forms) {
      const double m = med(f.ms);
      std::printf("%-8s %9.2f [%.2f %.2f]  direct/this %.2fx  yields+naps per rank per call %.0f\n", f.name, m,
                  *std::min_element(f.ms.begin(), f.ms.end()), *std::max_element(f.ms.begin(), f.ms.end()), base / m,
                  f.waits / static_cast<double>(f.ms.size()));
    }
    if (seg->cma()) {
      std::printf("# parts of single (the same work alone, no flags): ms per call, median [min max]\n");
      for (Form& f : parts)
        std::printf("%-8s %9.2f [%.2f %.2f]\n", f.name, med(f.ms), *std::min_element(f.ms.begin(), f.ms.end()),
                    *std::max_element(f.ms.begin(), f.ms.end()));
    }
    std::printf("%s\n", wrong ? "# RESULTS DIFFER" : "# every form's result equals the MPI's bit for bit");
  }
  MPI_Finalize();
  return wrong;
}
