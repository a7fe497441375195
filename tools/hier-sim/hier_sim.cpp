// hier-sim: the predicted time of a collective on a machine described in JSON, by the planner's
// own builders and cost code (src/model): libhier's schedule against the MPI's flat ring,
// recursive doubling and binomial tree, over a range of node counts.
//
//   hier-sim --machine FILE --coll allreduce --bytes 1g [--nodes 2,4,8 | --nodes 2-9408]
//            [--elem 4] [--csv FILE] [--algo NAME[/CHUNKS]]
//
// --algo costs that hierarchical algorithm (sched::to_string's name, e.g. scatter-allgather,
// two-step; CHUNKS: pipeline chunks, default 1) instead of the planner's cheapest one: the
// "libhier" column then is that schedule (bench/model/repredict.py compares a measured schedule
// with its prediction this way).
//
// The machine file: {"name": "...", "levels": [{"name": "gcd", "size": 2}, {"name": "gpu",
// "size": 4}] (inside a node, innermost first: ranks per group), "nodes": [2, 4, ...],
// "model": { a libhier-tune/2 object (docs/tune-file.md) }}. Times are nanoseconds in the CSV
// and milliseconds on the screen.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/cost.hpp"
#include "model/load.hpp"
#include "model/plan.hpp"
#include "model/shapes.hpp"

namespace {

using namespace hier;
using json = nlohmann::json;

const char* kUsage =
    "usage: hier-sim --machine FILE [--coll allreduce] [--bytes 1g] [--nodes 2,4,8 | --nodes 2-9408]\n"
    "                [--elem 4] [--csv FILE] [--algo NAME[/CHUNKS]]\n"
    "  The predicted time of a collective on the machine FILE describes (levels inside a node, node\n"
    "  counts, a libhier-tune/2 model: docs/tune-file.md), by libhier's planner and cost code:\n"
    "  libhier's schedule against the MPI's flat ring, recursive doubling and binomial tree, per\n"
    "  node count. --bytes: per rank (k, m, g suffixes); --elem: element size; --csv: times in ns\n"
    "  to FILE; --algo: cost that hierarchical algorithm (e.g. scatter-allgather, two-step) with\n"
    "  CHUNKS pipeline chunks instead of the planner's choice. Example: tools/hier-sim/frontier.json.\n";

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "hier-sim: %s\n", msg.c_str());
  std::exit(2);
}

int64_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  int64_t mult = 1;
  if (end && *end) {
    const char c = static_cast<char>(std::tolower(*end));
    mult = c == 'k' ? 1024 : c == 'm' ? 1024 * 1024 : c == 'g' ? int64_t{1} << 30 : 0;
    if (!mult) die("bad size '" + s + "' (e.g. 1048576, 64k, 4m, 1g)");
  }
  return static_cast<int64_t>(v * static_cast<double>(mult));
}

std::vector<int> parse_nodes(const std::string& s) {
  std::vector<int> out;
  const size_t dash = s.find('-');
  if (dash != std::string::npos) {
    const int lo = std::atoi(s.substr(0, dash).c_str()), hi = std::atoi(s.substr(dash + 1).c_str());
    for (int n = lo; n < hi; n *= 2) out.push_back(n);
    out.push_back(hi);
    return out;
  }
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) out.push_back(std::atoi(tok.c_str()));
  return out;
}

config::Coll coll_of(const std::string& name) {
  for (size_t c = 0; c < model::kColls; ++c)
    if (name == config::kCollKeys[c]) return static_cast<config::Coll>(c);
  die("unknown collective '" + name + "'");
}

}  // namespace

int main(int argc, char** argv) {
  std::string machine_path, coll_name = "allreduce", csv_path, nodes_arg, algo_arg;
  int64_t bytes = int64_t{1} << 30, elem = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--machine") machine_path = next();
    else if (a == "--coll") coll_name = next();
    else if (a == "--bytes") bytes = parse_bytes(next());
    else if (a == "--elem") elem = parse_bytes(next());
    else if (a == "--nodes") nodes_arg = next();
    else if (a == "--csv") csv_path = next();
    else if (a == "--algo") algo_arg = next();
    else die("unknown option " + a + " (hier-sim --help lists them)");
  }
  if (machine_path.empty()) die("--machine FILE is required");
  std::ifstream in(machine_path);
  if (!in) die("cannot read " + machine_path);
  const json mj = json::parse(in, nullptr, false);
  if (mj.is_discarded() || !mj.contains("model") || !mj.contains("levels")) die(machine_path + ": needs \"levels\" and \"model\"");
  const std::string fam = mj["model"]["machine"].value("mpi_family", std::string("mpich"));
  const model::Family family = fam == "openmpi" ? model::Family::OpenMPI : model::Family::Mpich;
  model::TuneFile tf;
  std::string err;
  if (!model::parse(mj["model"].dump(), family, {}, model::builtin(family), tf, err)) die(machine_path + ": " + err);
  tf.model.source = machine_path;
  const model::Model& m = tf.model;

  std::vector<std::pair<std::string, int>> levels;
  int ppn = 1;
  for (const json& l : mj["levels"]) {
    levels.emplace_back(l.at("name").get<std::string>(), l.at("size").get<int>());
    ppn *= levels.back().second;
  }
  std::vector<int> nodes = nodes_arg.empty() ? mj.value("nodes", std::vector<int>{2}) : parse_nodes(nodes_arg);
  const config::Coll coll = coll_of(coll_name);
  const bool reduction = coll == config::Coll::Allreduce || coll == config::Coll::Reduce ||
                         coll == config::Coll::ReduceScatter || coll == config::Coll::ReduceScatterBlock;
  const model::Call call{coll, bytes, reduction ? elem : 1};
  config::Config forced;
  forced.algo.fill(config::Algo::Hier);
  const config::Config autocfg;
  // --algo NAME[/CHUNKS]: that schedule instead of the planner's cheapest.
  bool algo_forced = false;
  sched::Algorithm algo_pick = sched::Algorithm::Flat;
  int algo_chunks = 1;
  if (!algo_arg.empty()) {
    const size_t slash = algo_arg.find('/');
    const std::string name = algo_arg.substr(0, slash);
    if (slash != std::string::npos) algo_chunks = std::atoi(algo_arg.substr(slash + 1).c_str());
    for (int i = 1; i < 64 && !algo_forced; ++i) {
      const auto a = static_cast<sched::Algorithm>(i);
      if (std::string(sched::to_string(a)) == "?") break;
      if (name == sched::to_string(a)) algo_forced = true, algo_pick = a;
    }
    // "tree" names two: the allreduce's and the rooted collectives'.
    if (name == "tree") algo_pick = coll == config::Coll::Allreduce ? sched::Algorithm::TreeAllreduce : sched::Algorithm::Tree;
    if (!algo_forced || algo_chunks < 1) die("--algo " + algo_arg + ": not an algorithm name[/chunks]");
  }

  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (!csv_path.empty() && !csv) die("cannot write " + csv_path);
  if (csv) std::fprintf(csv, "nodes,ranks,collective,bytes,libhier_ns,libhier_algorithm,chunks,flat_mpi_ns,flat_ring_ns,flat_recursive_doubling_ns,flat_tree_ns,planner\n");
  std::printf("%s: %s of %lld bytes, %d ranks per node (%s)\n", mj.value("name", machine_path).c_str(), coll_name.c_str(),
              static_cast<long long>(bytes), ppn, tf.model.source.c_str());
  std::printf("%8s %9s %14s %-18s %12s %12s %12s %12s  %s\n", "nodes", "ranks", "libhier ms", "algorithm", "MPI ms",
              "ring ms", "rec.dbl ms", "tree ms", "auto");
  for (int n : nodes) {
    if (n < 1) die("node counts must be >= 1");
    std::vector<std::pair<std::string, int>> lv = levels;
    lv.emplace_back("world", n);
    const topo::Shape s = model::cartesian(lv);
    model::Plan hier = model::plan(call, s, m, forced);
    if (algo_forced && hier.algo != sched::Algorithm::Flat) {
      hier.algo = algo_pick, hier.chunks = algo_chunks;
      hier.hier_ns = model::hier_cost(call, s, m, algo_pick, algo_chunks);
    }
    const model::Plan chosen = model::plan(call, s, m, autocfg);
    const model::FlatNet net(m, n, ppn);
    const model::Op op = model::op_of(coll);
    const double red = m.reduce_ns_per_byte, b = static_cast<double>(bytes);
    const double ring = model::algo_cost(op, model::Algo::Ring, b, n * ppn, net, red);
    const double rd = model::algo_cost(op, model::Algo::RecursiveDoubling, b, n * ppn, net, red);
    const double tree = model::algo_cost(op, model::Algo::Binomial, b, n * ppn, net, red);
    const double mpi = model::flat_cost(coll, bytes, s, m);
    const bool h = hier.algo != sched::Algorithm::Flat;
    std::printf("%8d %9d %14.3f %-18s %12.3f %12.3f %12.3f %12.3f  %s\n", n, n * ppn, h ? hier.hier_ns / 1e6 : mpi / 1e6,
                h ? sched::to_string(hier.algo) : "flat", mpi / 1e6, ring / 1e6, rd / 1e6, tree / 1e6,
                chosen.algo == sched::Algorithm::Flat ? "flat" : "hier");
    if (csv)
      std::fprintf(csv, "%d,%d,%s,%lld,%.6f,%s,%d,%.6f,%.6f,%.6f,%.6f,%s\n", n, n * ppn, coll_name.c_str(),
                   static_cast<long long>(bytes), h ? hier.hier_ns : mpi, h ? sched::to_string(hier.algo) : "flat",
                   hier.chunks, mpi, ring, rd, tree, chosen.algo == sched::Algorithm::Flat ? "flat" : "hier");
  }
  if (csv) std::fclose(csv);
  return 0;
}
