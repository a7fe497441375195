#include "core/lifecycle.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include "config/config.hpp"
#include "core/agree_config.hpp"
#include "core/tools.hpp"
#include "base/hooks.hpp"
#include "diag/flight.hpp"
#include "diag/log.hpp"
#include "diag/report.hpp"
#include "diag/sites.hpp"
#include "diag/trace.hpp"
#include "diag/watch.hpp"

namespace hier::core {

void finalize_libhier();

namespace {
std::mutex g_init_mu;

std::string library_version() {
  // Sized for any MPI, not this build's: a program of the other family writes its own maximum
  // (MPICH: 8192 bytes, Open MPI: 256) before the family check can run.
  char buf[16384] = {0};
  int len = 0;
  PMPI_Get_library_version(buf, &len);  // allowed before MPI_Init
  std::string s(buf, len > 0 ? static_cast<size_t>(len) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

// The report is written at MPI_Finalize. Bindings that finalize through PMPI directly (MPICH's
// mpi_f08) and programs that exit without MPI_Finalize get it at exit instead: it needs no MPI.
void report_at_exit() {
  if (g_runtime.finalize_seen) return;
  const config::Config& cfg = config::get();
  if (!cfg.report.empty()) diag::write_report(cfg, g_runtime.world_rank, g_runtime.world_size, g_runtime.mpi_library);
}
}  // namespace

void check_mpi_family_or_die() {
  const std::string v = library_version();
  if (base::library_matches_build(v)) return;
  const std::string first = v.substr(0, v.find_first_of("\n,"));
  std::fprintf(stderr,
               "libhier: FATAL: this libhier.so was built for %s, but the program runs on '%s'. "
               "Preload the libhier.so built for that MPI (cmake --preset %s).\n",
               base::built_for_mpi(), first.c_str(), v.find("Open MPI") != std::string::npos ? "openmpi" : "mpich");
  std::fflush(stderr);
  _exit(1);  // no handle of this MPI may be touched: stop before anything else runs
}

namespace {
void initialize(bool world_model, bool at_init) {
  std::lock_guard<std::mutex> lk(g_init_mu);
  if (g_runtime.state.load() != State::Uninit) return;
  const config::ParseResult& parsed = config::process_config();
  const config::Config& cfg = parsed.config;
  int rank = -1, size = 0;
  if (world_model) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  g_runtime.world_rank = rank;
  g_runtime.world_size = size;
  g_runtime.mpi_library = library_version();
  log::init(cfg, rank);
  // INFO lines of the layers below the logger (device: a GPU runtime loaded without a device).
  base::set_info_sink([](const char* subsys, const std::string& text) { HIER_INFO(subsys, "%s", text.c_str()); });
  check_tool_order(rank);  // another PMPI tool before or after libhier (docs/tools.md)
  // Configuration problems are printed once (rank 0), whatever HIER_DEBUG says.
  if (rank <= 0) {
    for (const std::string& e : parsed.errors)
      log::write(config::LogLevel::Warn, "config", __FILE__, __LINE__, "%s", e.c_str());
    for (const std::string& w : parsed.warnings)
      log::write(config::LogLevel::Warn, "config", __FILE__, __LINE__, "%s", w.c_str());
  }
  if (!parsed.errors.empty() && cfg.strict) {
    // Every rank says why before aborting: whichever aborts first takes the others down.
    if (rank > 0)
      for (const std::string& e : parsed.errors)
        log::write(config::LogLevel::Warn, "config", __FILE__, __LINE__, "%s", e.c_str());
    log::write(config::LogLevel::Warn, "config", __FILE__, __LINE__, "HIER_STRICT=1: stopping on invalid configuration");
    // Give the launcher a moment to forward stderr: MPI_Abort kills the ranks' pipes at once.
    usleep(300 * 1000);
    PMPI_Abort(world_model ? MPI_COMM_WORLD : MPI_COMM_SELF, 1);
  }
  // Runs under HIER_DISABLE=1 too: a rank disabled alone would otherwise pass through while its
  // peers build hierarchical schedules. One small allreduce, once.
  if (world_model && at_init && !agree_config(rank)) {
    usleep(300 * 1000);  // let the launcher forward rank 0's line first
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Hang watchdog: side channel set up with one PMPI_Allgather (HIER_WATCHDOG is agreed above).
  if (world_model && at_init && !cfg.disable && cfg.watchdog_s > 0 && !config_differs()) {
    diag::watch_init(cfg.watchdog_s, rank, size, cfg.report.c_str());
    base::add_report_section("hangs", diag::hangs_json);
  }
  // HIER_TRACE (agreed above, so the finalize clock exchange is made by all ranks or none).
  if (world_model && at_init && !cfg.disable && !cfg.trace.empty() && !config_differs()) diag::trace::trace_init(true);
  // The flight recorder (HIER_FLIGHT): per-thread rings of the last collective calls.
  if (world_model && at_init && !cfg.disable) diag::flight_init(cfg.flight);
  // Call-site timing for the report (stragglers, the finalize mismatch check): one 4-byte
  // PMPI_Allreduce decides on every rank, so the finalize exchange is made by all or none. It
  // runs under HIER_DISABLE=1 too (finalize_libhier runs on passive ranks as well): a rank
  // disabled alone that skipped it would leave its peers' allreduce matching its program's
  // first collective (a hang, coll.mismatch.disable).
  if (world_model && at_init) diag::sites_init(!cfg.report.empty(), cfg.watchdog_s > 0);
  HIER_INFO("core", "libhier %s for %s: %s", HIER_VERSION_STRING, base::built_for_mpi(),
            cfg.disable ? "HIER_DISABLE=1, passthrough" : "active");
  std::atexit(report_at_exit);
  g_runtime.state.store(cfg.disable ? State::Passive : State::Active);
}

}  // namespace

// No exception may leave MPI_Init: one from libhier's setup leaves libhier passive (every call
// goes to the MPI) and the program's MPI_Init succeeds as it would without libhier.
void on_initialized(bool world_model, bool at_init) {
  Guard guard;
  try {
    initialize(world_model, at_init);
  } catch (const std::exception& e) {
    g_runtime.state.store(State::Passive);
    std::fprintf(stderr, "libhier: setup failed (%s); every call goes to the MPI unchanged\n", e.what());
  } catch (...) {
    g_runtime.state.store(State::Passive);
    std::fprintf(stderr, "libhier: setup failed; every call goes to the MPI unchanged\n");
  }
}

bool lazy_init() {
  Guard guard;
  int initialized = 0, finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  on_initialized(true);
  return g_runtime.state.load() == State::Active;
}

void on_finalizing() {
  Guard guard;
  try {
    finalize_libhier();
  } catch (...) {
    g_runtime.state.store(State::Passive);  // the report may be missing; MPI_Finalize still runs
  }
}

void finalize_libhier() {
  {
    std::lock_guard<std::mutex> lk(g_init_mu);
    if (g_runtime.state.load() == State::Uninit) return;  // never initialized through libhier
    g_runtime.state.store(State::Passive);
    if (g_runtime.finalize_seen) return;
    g_runtime.finalize_seen = true;
  }
  diag::watch_finalize();
  diag::flight_finalize();
  diag::sites_finalize();  // PMPI on MPI_COMM_WORLD: every rank is in MPI_Finalize
  diag::trace::trace_finalize(g_runtime.world_rank, g_runtime.world_size);  // PMPI too (clock offsets)
  const config::Config& cfg = config::get();
  if (!cfg.report.empty()) diag::write_report(cfg, g_runtime.world_rank, g_runtime.world_size, g_runtime.mpi_library);
  base::run_finalize_hooks();
  base::set_info_sink(nullptr);  // the logger closes next
  log::shutdown();
}

}  // namespace hier::core
