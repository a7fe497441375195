// hier-tune: measures libhier's machine model on the user's machine and writes one JSON file
// in the format "libhier-tune/2" (docs/tune-file.md) for HIER_TUNE_FILE, through the one schema
// the loader reads (model/tune_schema.hpp): the collectives
// planner's per-level parameters and the datatype engine's cost lines.
//   mpiexec -n N hier-tune [-o FILE] [--quick] [--ladder] [--level-steps]   (launched like the application)
//   hier-run mpiexec -n N hier-tune ...                                    (libhier's schedules too)
// What it measures (every figure the median of repetitions, the slowest rank's time):
//  - levels.intra: two ranks sharing memory (MPI_COMM_TYPE_SHARED): half a ping-pong of 0 bytes
//    while the others wait, and the time per round of a 4-byte allreduce on every node at once
//    (latency: the larger of the two, see busy_latency_ns), and one-way streams of large
//    messages (ns per byte) with k = 1 .. ppn members of node 0 each sending to the next one at
//    once (concurrent; at k = ppn every member sends and receives, as in a ring step; the time
//    per byte is the slope between 1/4 of the size and the size), and, with --ladder only, the
//    ladder: one message of 4 KiB .. 4 MiB alone and with every member of node 0 sending at once.
//    Off by default: on the emulated cluster its points were scheduler wake-ups, not bytes, and
//    made the model's predictions worse (docs/model.md, "The ladder: opt-in").
//  - levels.inter: the same between node 0 and node 1, with k = 1 .. ppn members of node 0 each
//    sending to one member of node 1 at once. Omitted (and said) when the job has one node.
//  - planner.step_overhead_ns: one wake-up of every member per level step, the larger busy
//    latency of the levels.
//  - compute: MPI_Reduce_local (MPI_FLOAT, MPI_SUM) and memcpy, per byte; the quantization
//    kernels (HIER_QUANT) at HIER_QUANT_BLOCK, int8 and int4: quantize, dequantize and the fused
//    dequantize + add, per byte of float32 data (compute.quant; under a second in all).
//  - levels.X.steps (only with --level-steps): the same four collectives on the level's
//    communicators, every one at once (all nodes' node communicators; all cross communicators,
//    one per node position), as a schedule's level step runs them, 16 KiB .. 4 MiB (--quick: 16
//    and 256 KiB), median of 3, with the member count (`members`); `ns` is the measured time
//    (`measured_ns`) less the level's busy latency (at least a fifth of it): a step timed alone
//    pays for waking its members, inside a schedule they run already. The cost code uses them
//    for level steps of that member count (docs/model.md, "Measured level steps"). Only when
//    every node has as many ranks.
//  - shm (HIER_SHM's segment, shm.cpp): on a segment of each node's members, every member at
//    once, the time per byte of copying into and out of the slots and of folding the peers'
//    slots, and one flag round; what the planner costs steps through the segment with, and what
//    HIER_SHM=auto weighs against the MPI's messages.
//  - flat_measured: the MPI's own Allreduce / Allgather / Reduce_scatter_block / Bcast on the
//    whole communicator, 64 KiB .. 16 MiB, bytes counted as the planner counts them; and
//    flat_measured_nonblocking: the same through MPI_Iallreduce / MPI_Iallgather /
//    MPI_Ireduce_scatter_block / MPI_Ibcast, each followed at once by MPI_Wait (the planner's
//    figure for a nonblocking call).
//  - hier_measured (when libhier is preloaded, unless --no-hier; --hier without it: an error):
//    the same four collectives at the same sizes through libhier with HIER_ALGO=hier
//    (HIER_QUANT=off, HIER_CHUNK=auto; HIER_LEVELS as the job sets it): its hierarchical
//    schedules as the planner picks them, which are the planner's hierarchical prediction on
//    this shape (docs/model.md, "Measured schedules"); and hier_measured_nonblocking, the same
//    through the nonblocking calls.
//  - dtype: the datatype engine's model (the "p2p" object of libhier-tune/1): time(bytes, blocks)
//    = a + b * bytes + c * blocks fitted by least squares for libhier's engine and the MPI's own
//    PMPI_Pack/PMPI_Unpack over vectors of 4 B .. 4 KiB blocks, and one message end to end
//    between ranks 0 and 1 with the derived type through the MPI and as contiguous bytes.
//  - device (device.cpp, rank 0, only where a GPU runtime is loaded and the GPU module loads,
//    HIER_GPU_MODULE): the module's copies (device -> device, pinned host <-> device), float32
//    sum and quantization kernels per byte, and one kernel or copy queued and waited for: what
//    the planner costs device-bound schedules with (model/cost_device.hpp).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "config/config.hpp"
#include "model/load.hpp"
#include "util/files.hpp"
#include "measure.hpp"

namespace {

using namespace hier::tune;

const char* kUsage =
    "usage: mpiexec -n N hier-tune [-o FILE] [--quick] [--ladder] [--level-steps] [--help]\n"
    "       hier-run mpiexec -n N hier-tune [-o FILE] ...   (libhier's schedules too)\n"
    "  Measures libhier's machine model (levels, compute, the MPI's own collectives on the whole\n"
    "  communicator, datatype engine) and writes it as JSON\n"
    "  (format libhier-tune/2, docs/tune-file.md) to FILE\n"
    "  (default: stdout). Launch it like the application: same nodes, ranks per node, MPI.\n"
    "  --quick   fewer sizes and repetitions (seconds; for tests)\n"
    "  --ladder  also measure each level's message ladder (levels.X.ladder), which the cost\n"
    "            code then uses instead of latency + bytes x time per byte; off by default\n"
    "            (docs/model.md: on an oversubscribed machine its points are wake-ups)\n"
    "  --level-steps  also time the MPI's collectives on each level's communicators\n"
    "            (levels.X.steps), which the cost code then uses for level steps of that size;\n"
    "            off by default until validated in a run (docs/model.md, \"Measured level steps\")\n"
    "  --hier    time libhier's own hierarchical schedules of the same four collectives too\n"
    "            (hier_measured), which the planner then predicts from on this shape\n"
    "            (docs/model.md, \"Measured schedules\"); the default when libhier is preloaded\n"
    "            (hier-run), an error when it is not\n"
    "  --no-hier do not, even with libhier preloaded\n";

std::string iso_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  // libhier's own schedules (hier_measured) are timed when libhier is preloaded, unless
  // --no-hier; --hier insists (an error without libhier). The preloaded libhier reads its
  // configuration in MPI_Init, so it must see these first: its hierarchical schedules, exact,
  // whatever the job's environment says.
  bool want_hier = false, no_hier = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {  // before MPI_Init: no MPI needed
      std::fputs(kUsage, stdout);
      return 0;
    }
    want_hier = want_hier || std::strcmp(argv[i], "--hier") == 0;
    no_hier = no_hier || std::strcmp(argv[i], "--no-hier") == 0;
  }
  const bool preloaded = libhier_loaded();
  const bool hier = !no_hier && (want_hier || preloaded);
  if (hier && preloaded) {
    setenv("HIER_ALGO", "hier", 1);
    setenv("HIER_QUANT", "off", 1);
    setenv("HIER_CHUNK", "auto", 1);  // the chunks the planner chooses (plan.cpp uses the points only then)
    setenv("HIER_DISABLE", "0", 1);
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string out;
  bool quick = false, ladder = false, level_steps = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--ladder") {
      ladder = true;
    } else if (a == "--hier" || a == "--no-hier") {
      // (read above, before MPI_Init)
    } else if (a == "--level-steps") {
      level_steps = true;
    } else {
      if (rank == 0)
        std::fprintf(stderr, "hier-tune: %s '%s'\n%s", a == "-o" ? "missing file name after" : "unknown argument",
                     a.c_str(), kUsage);
      MPI_Finalize();
      return 2;
    }
  }
  if (want_hier && no_hier) {
    if (rank == 0) std::fprintf(stderr, "hier-tune: --hier and --no-hier contradict each other\n%s", kUsage);
    MPI_Finalize();
    return 2;
  }
  if (hier && !preloaded) {
    if (rank == 0)
      std::fprintf(stderr,
                   "hier-tune: --hier times libhier's schedules, but libhier.so is not loaded: launch as "
                   "hier-run mpiexec -n N hier-tune (or with LD_PRELOAD=libhier.so)\n");
    MPI_Finalize();
    return 2;
  }
  // The quantization block the kernels are timed at: HIER_QUANT_BLOCK as libhier reads it (an
  // invalid value: libhier's one line, and its default, which libhier would run with too).
  for (const std::string& e : hier::config::process_config().errors)
    if (e.rfind("HIER_QUANT_BLOCK=", 0) == 0 && rank == 0) std::fprintf(stderr, "hier-tune: warning: %s\n", e.c_str());
  const int64_t quant_block = hier::config::get().quant_block;
  // Check the output file first, so that a bad path costs no measurement.
  int writable = 1;
  if (rank == 0 && !out.empty()) {
    // (a temporary file beside it, created and removed: nothing at the path itself is opened,
    // created or followed; the file appears only once complete, so that a launcher may wait for it)
    std::string err;
    if (!hier::util::can_create_beside(out, err)) {
      std::fprintf(stderr, "hier-tune: cannot write %s: %s\n", out.c_str(), err.c_str());
      writable = 0;
    }
  }
  PMPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!writable) {
    MPI_Finalize();
    return 1;
  }
  const double t_start = now();
  set_batch(quick ? 0.002 : 0.01);
  MPI_Comm pair = MPI_COMM_NULL;  // ranks 0 and 1
  PMPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
  const Shape s = shape();
  const RankMap map = rank_map(s);
  if (!s.uniform && rank == 0)
    std::fprintf(stderr,
                 "hier-tune: warning: nodes have different numbers of ranks; the file states %d per node "
                 "(no levels.X.steps)\n",
                 s.ppn);

  hier::model::TuneDoc doc;  // written through the one schema (model/tune_schema.hpp) the loader reads
  hier::model::Model& m = doc.model;
  m.family = hier::model::build_family();
  m.nodes = s.nodes;
  m.ranks_per_node = s.ppn;
  std::vector<char> buf((quick ? 1 : 4) << 20, 1);
  // intra: node 0, members i -> i + 1 (mod ppn), k = 1 .. ppn flows: with k = ppn every member
  // sends and receives, as in a ring step of a level collective (the model's flows of a step
  // inside a node are the members running it).
  doc.has.intra = s.ppn >= 2;
  if (doc.has.intra) {
    const int ppn = s.ppn;
    m.intra = measure_level(s, map, 0, 0, [](int i) { return i; }, [ppn](int i) { return (i + 1) % ppn; }, ppn, quick,
                            ladder, buf, s.node_comm, s.ppn, doc.intra_notes);
    // (every node the same size: the communicators of the level are alike)
    if (s.uniform && level_steps) measure_steps(s.node_comm, s.ppn, quick, doc.intra_notes.busy_latency_ns, m.intra);
  } else if (rank == 0) {
    std::fprintf(stderr, "hier-tune: one rank per node: levels.intra not measured\n");
  }
  // inter: node 0 member i -> node 1 member i, i < k, k = 1 .. ppn
  doc.has.inter = s.nodes >= 2;
  if (doc.has.inter) {
    int ppn1 = 0;
    for (size_t r = 0; r < map.node.size(); ++r) ppn1 += map.node[r] == 1;
    MPI_Comm cross = MPI_COMM_NULL;  // the ranks of one node position, one per node
    PMPI_Comm_split(MPI_COMM_WORLD, s.local, s.rank, &cross);
    m.inter = measure_level(s, map, 0, 1, [](int i) { return i; }, [](int i) { return i; }, std::min(s.ppn, ppn1),
                            quick, ladder, buf, cross, s.nodes, doc.inter_notes);
    if (s.uniform && level_steps) measure_steps(cross, s.nodes, quick, doc.inter_notes.busy_latency_ns, m.inter);
    PMPI_Comm_free(&cross);
  } else if (rank == 0) {
    std::fprintf(stderr, "hier-tune: one node: only levels.intra is measured (no levels.inter)\n");
  }
  // A level step of a schedule starts when its last member is scheduled: one more wake-up of
  // every member, which is the busy latency of the slower level (validated on the emulated
  // cluster: the hierarchical schedules' small-message times exceeded the predictions by about
  // one busy latency per level step; bench/RESULTS.md, "Model validation").
  m.step_overhead_ns = std::max({0.0, doc.intra_notes.busy_latency_ns, doc.inter_notes.busy_latency_ns});
  doc.has.step_overhead = m.step_overhead_ns > 0;  // else the built-in's
  measure_compute(quick, quant_block, doc);  // every rank measures; rank 0's figures are kept
  doc.has.shm = measure_shm(s, quick, m.shm);
  if (!doc.has.shm && rank == 0)
    std::fprintf(stderr, "hier-tune: no shared segment on the nodes (one rank per node, or none could be mapped): no shm section\n");
  m.flat_measured = measure_colls(s, quick, false, false);
  m.flat_measured_nb = measure_colls(s, quick, false, true);
  if (hier) {
    if (s.nodes < 2 && rank == 0)
      std::fprintf(stderr,
                   "hier-tune: one node: libhier's schedules measured on the levels HIER_LEVELS gives (the planner "
                   "uses hier_measured only on a shape across nodes)\n");
    m.hier_measured = measure_colls(s, quick, true, false);
    m.hier_measured_nb = measure_colls(s, quick, true, true);
    doc.has.hier_measured = true;
  }
  doc.dtype_json = measure_dtype(rank, size, quick, pair).dump();
  // The GPU module's rates (rank 0 alone: the ranks of a node may share one GPU).
  if (rank == 0 && measure_device(quick, quant_block, m.device)) {
    doc.has.device = true;
    std::fprintf(stderr, "hier-tune: device rates measured with the GPU module (%s)\n", m.device.module.c_str());
  }

  if (rank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string l(lib, len);
    l = l.substr(0, l.find_first_of("\n,"));
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t')) l.pop_back();
    for (char& c : l)
      if (c == '\t') c = ' ';
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    doc.machine = {host, l, iso_now(), "hier-tune 6"};
    const std::string text = hier::model::write(doc);
    if (out.empty()) {
      std::fputs(text.c_str(), stdout);
    } else {
      // A new 0600 file beside it, renamed over it: never written through a symlink planted there.
      std::string err;
      if (!hier::util::write_file_replacing(out, text, err)) {
        std::fprintf(stderr, "hier-tune: cannot write %s: %s\n", out.c_str(), err.c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::fprintf(stderr, "hier-tune: wrote %s in %.0f s (%d nodes x %d ranks; use HIER_TUNE_FILE=%s)\n", out.c_str(),
                   now() - t_start, s.nodes, s.ppn, out.c_str());
    }
  }
  if (pair != MPI_COMM_NULL) PMPI_Comm_free(&pair);
  PMPI_Comm_free(const_cast<MPI_Comm*>(&s.node_comm));
  MPI_Finalize();
  return 0;
}

