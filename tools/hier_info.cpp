// hier-info: what libhier would do in this environment. Prints the parsed HIER_* configuration
// (with any errors), the MPI library, and with --vars / --markdown every variable libhier knows;
// these need no mpiexec and never initialize MPI. `--levels`, run under mpiexec like the
// application, initializes MPI and prints the levels HIER_LEVELS gives MPI_COMM_WORLD there and
// which ranks share each group.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/registry.hpp"
#include "base/runtime.hpp"
#include "device/pointer.hpp"
#include "topo/discover.hpp"
#include "topo/shape.hpp"

namespace {
void usage() {
  std::puts("usage: hier-info [--vars | --markdown | --levels | --help]\n"
            "  (no option)  parsed configuration, MPI library, problems found\n"
            "  --vars       every HIER_* variable with default, allowed values and meaning\n"
            "  --markdown   the same as a Markdown table (the README's table is this output)\n"
            "  --levels     under mpiexec: the levels of MPI_COMM_WORLD and the ranks of each group");
}

// Collective over MPI_COMM_WORLD: the same discovery libhier runs on a communicator's first
// hierarchical collective, printed by rank 0 (with every rank's hostname).
int print_levels() {
  using namespace hier;
  MPI_Init(nullptr, nullptr);
  const config::ParseResult& p = config::process_config();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const topo::GroupTable t = topo::discover(comm, p.config, true);
  const topo::Shape s = topo::analyze(t);
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int hlen = 0;
  MPI_Get_processor_name(host, &hlen);
  std::vector<char> hosts(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("HIER_LEVELS=%s on %d ranks: %s\n", config::levels_to_string(p.config).c_str(), size, s.describe().c_str());
    for (size_t l = 0; l < t.names.size(); ++l) {
      std::map<int, std::vector<int>> groups;  // id -> ranks, in rank order
      for (int r = 0; r < size; ++r) groups[t.at(r, static_cast<int>(l))].push_back(r);
      std::printf("  level %s (%zu group%s):\n", t.names[l].c_str(), groups.size(), groups.size() == 1 ? "" : "s");
      for (const auto& [id, ranks] : groups) {
        std::printf("    ranks");
        for (int r : ranks) std::printf(" %d", r);
        std::printf("  (on %s)\n", &hosts[static_cast<size_t>(ranks.front()) * MPI_MAX_PROCESSOR_NAME]);
      }
    }
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
// The GPU runtime a program could load here, and what libhier makes of it (device/pointer.hpp):
// hier-info loads the first one found itself (a program would) and asks libhier's own probe, so a
// runtime installed without a device (ROCm on a CPU node, GPUs masked) shows as host memory only.
void print_gpu_runtime() {
  static const char* const libs[] = {"libcuda.so.1", "libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5"};
  const char* found = nullptr;
  for (const char* l : libs) {
    void* h = dlopen(l, RTLD_NOW | RTLD_GLOBAL);
    if (!h) continue;
    found = l;
    // CUDA counts devices only after cuInit, which a CUDA program has called before it has
    // device memory; HIP initializes itself.
    if (auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(h, "cuInit"))) init(0);
    break;
  }
  const hier::device::Runtime r = hier::device::pointer_detail::probe();
  const std::string& why = hier::device::pointer_detail::no_device_reason();
  if (!found) std::printf("GPU runtime: none found (libcuda.so.1, libamdhip64.so): every buffer is host memory\n");
  else if (!why.empty()) std::printf("GPU runtime: %s\n", why.c_str());
  else if (r == hier::device::Runtime::None) std::printf("GPU runtime: %s loads but has no pointer query: buffers are left to the MPI\n", found);
  else std::printf("GPU runtime: %s (%s) with a device: each buffer's memory is asked of it\n", hier::device::to_string(r), found);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace hier;
  if (argc > 1 && !std::strcmp(argv[1], "--markdown")) {
    std::fputs(config::markdown_table().c_str(), stdout);
    return 0;
  }
  if (argc > 1 && !std::strcmp(argv[1], "--vars")) {
    for (const config::VarSpec& v : config::registry())
      std::printf("%s\n    default: %s\n    allowed: %s\n    %s\n", v.name, *v.default_value ? v.default_value : "(unset)",
                  v.allowed, v.doc);
    return 0;
  }
  if (argc > 1 && !std::strcmp(argv[1], "--levels")) return print_levels();
  if (argc > 1) {
    usage();
    return std::strcmp(argv[1], "--help") && std::strcmp(argv[1], "-h") ? 2 : 0;
  }
  char lib[16384] = {0};  // any MPI's maximum, not only this build's
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string l(lib);
  l = l.substr(0, l.find('\n'));
  const config::ParseResult& p = config::process_config();
  const config::Config& c = p.config;
  std::printf("libhier %s, built for %s\n", HIER_VERSION_STRING, base::built_for_mpi());
  std::printf("MPI library: %s%s\n", l.c_str(), base::library_matches_build(lib) ? "" : "  (MISMATCH: wrong build)");
  print_gpu_runtime();
  std::printf("configuration:\n");
  std::printf("  HIER_DISABLE     %d\n", c.disable);
  std::printf("  HIER_STRICT      %d\n", c.strict);
  std::printf("  HIER_LEVELS      %s\n", config::levels_to_string(c).c_str());
  std::printf("  HIER_ALGO       ");
  for (size_t i = 0; i < config::kCollKeys.size(); ++i) std::printf(" %s=%s", config::kCollKeys[i], config::to_string(c.algo[i]).c_str());
  std::printf("\n  HIER_QUANT      ");
  for (size_t i = 0; i < config::kCollKeys.size(); ++i) std::printf(" %s=%s", config::kCollKeys[i], config::to_string(c.quant[i]).c_str());
  std::printf("\n  HIER_DEBUG       %s\n", config::to_string(c.debug).c_str());
  std::printf("  HIER_DEBUG_FILE  %s\n", c.debug_file.empty() ? "(stderr)" : c.debug_file.c_str());
  std::printf("  HIER_REPORT      %s\n", c.report.empty() ? "(none)" : c.report.c_str());
  std::printf("  HIER_CHUNK       %s\n", config::chunk_to_string(c.chunk_bytes).c_str());
  std::printf("  HIER_WATCHDOG    %g s\n", c.watchdog_s);
  std::printf("  HIER_TUNE_FILE   %s\n", c.tune_file.empty() ? "(built-in defaults)" : c.tune_file.c_str());
  for (const std::string& e : p.errors) std::printf("error: %s\n", e.c_str());
  for (const std::string& w : p.warnings) std::printf("warning: %s\n", w.c_str());
  return p.errors.empty() ? 0 : 1;
}
