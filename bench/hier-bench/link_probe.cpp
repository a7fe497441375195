// link-probe: what the MPI alone moves across the node links when every rank of a node talks
// to its counterpart on the next node at once: the practical floor on a machine, next to the
// link-bound floor (bytes / link rate). No collective, no reduction, no libhier (run it without
// LD_PRELOAD): PMPI-level pair traffic only, with the MPI's own waiting.
//
//   mpiexec -n N link-probe [--bytes B] [--iters N] [--senders K]
//
// B: bytes each NODE sends per iteration (default 16 MiB, what a 16 MiB allreduce must send
// across 2 nodes), split evenly over its first K ranks (default: all); each of them sends its
// share to the rank with the same local index on the next node and receives from the previous
// node (a ring of nodes). The other ranks wait in MPI_Barrier meanwhile (the MPI's own waiting).
// Prints the median and minimum over iterations of the slowest rank's time, and the rate per
// node per direction. Needs equal ranks per node.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)  // --help before MPI_Init: no launcher or MPI needed
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::puts("usage: mpiexec -n N link-probe [--bytes B] [--iters N] [--senders K]\n"
                "  What the MPI alone moves across the node links when every rank of a node sends to its\n"
                "  counterpart on the next node at once (no libhier: run it without LD_PRELOAD). B: bytes\n"
                "  each node sends per iteration (default 16 MiB), split over its first K ranks (default\n"
                "  all). Prints the median and minimum of the slowest rank's time and the rate per node.");
      return 0;
    }
  MPI_Init(&argc, &argv);
  long long bytes = 16ll << 20;
  int iters = 8, senders = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--senders") && i + 1 < argc) senders = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "link-probe: unknown option %s (link-probe --help lists them)\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node, cross;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local = 0, ppn = 1;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &ppn);
  MPI_Comm_split(MPI_COMM_WORLD, local, rank, &cross);
  int me = 0, nodes = 1;
  MPI_Comm_rank(cross, &me);
  MPI_Comm_size(cross, &nodes);
  int ppn_min = ppn, ppn_max = ppn;
  MPI_Allreduce(MPI_IN_PLACE, &ppn_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &ppn_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (nodes < 2 || ppn_min != ppn_max) {
    if (rank == 0) std::fprintf(stderr, "link-probe: needs 2+ nodes with equal ranks per node (%d nodes, %d-%d per node)\n", nodes, ppn_min, ppn_max);
    MPI_Finalize();
    return 2;
  }
  if (senders <= 0 || senders > ppn) senders = ppn;
  const bool sends = local < senders;
  const size_t share = static_cast<size_t>(bytes / senders);
  std::vector<char> out(share, static_cast<char>(rank)), in(share);
  const int to = (me + 1) % nodes, from = (me + nodes - 1) % nodes;
  int sender = 0;  // world rank of the rank I receive from
  MPI_Group cg, wg;
  MPI_Comm_group(cross, &cg);
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_translate_ranks(cg, 1, &from, wg, &sender);
  MPI_Group_free(&cg);
  MPI_Group_free(&wg);
  std::vector<double> t;
  for (int it = 0; it < iters + 1; ++it) {  // the first is a warm-up (connection setup)
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    if (sends)
      MPI_Sendrecv(out.data(), static_cast<int>(share), MPI_BYTE, to, 0, in.data(), static_cast<int>(share), MPI_BYTE, from, 0,
                   cross, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);  // the others wait here, as non-leaders wait in a hierarchical schedule
    double d = MPI_Wtime() - t0, worst = 0;
    MPI_Reduce(&d, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (it > 0) t.push_back(worst);
    if (sends && share > 0 && (in[0] != static_cast<char>(sender) || in[share - 1] != static_cast<char>(sender))) {
      std::fprintf(stderr, "link-probe: rank %d received wrong data\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (rank == 0) {
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    std::printf("link-probe: %d nodes x %d ranks, %d sending per node, %lld bytes per node per direction: median %.1f ms, "
                "min %.1f ms, %.1f MB/s per node per direction (median)\n",
                nodes, ppn, senders, static_cast<long long>(share * senders), med * 1e3, t.front() * 1e3,
                share * senders / med / 1e6);
  }
  MPI_Comm_free(&cross);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return 0;
}
