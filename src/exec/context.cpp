#include "exec/context.hpp"

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "base/hooks.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "diag/log.hpp"
#include "exec/device_steps.hpp"
#include "exec/fallback.hpp"
#include "exec/request.hpp"

namespace hier::exec {
namespace {

std::mutex g_mu;
int g_keyval = MPI_KEYVAL_INVALID;
std::vector<Context*> g_live;                 // for the finalize hook and the census
std::map<std::string, long> g_shapes;          // report: shape description -> communicators
long g_created = 0;                            // report: contexts ever created

void unregister(Context* c) {
  std::lock_guard<std::mutex> lk(g_mu);
  std::erase(g_live, c);
}

int delete_context(MPI_Comm, int, void* attr, void*) {
  auto* c = static_cast<Context*>(attr);
  unregister(c);
  drain(c);  // nonblocking requests still running here complete first (MPI_Comm_free allows them)
  delete c;  // frees the level communicators
  return MPI_SUCCESS;
}

// At MPI_Finalize (before PMPI_Finalize): delete the attribute of every communicator still
// alive (MPI_COMM_WORLD, communicators the program never freed), which frees their levels.
void on_finalize() {
  std::vector<MPI_Comm> comms;
  int keyval;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (Context* c : g_live) comms.push_back(c->comm);
    keyval = g_keyval;
  }
  for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, keyval);
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
  g_keyval = MPI_KEYVAL_INVALID;
}

std::string topology_report() {
  std::lock_guard<std::mutex> lk(g_mu);
  nlohmann::json j;
  j["levels"] = config::levels_to_string(config::get());
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [desc, n] : g_shapes) shapes[desc] = n;
  j["communicators"] = shapes;
  long level_comms = 0;
  for (Context* c : g_live)
    if (c->levels) level_comms += c->levels->owned_count();
  // At report time (before the finalize hook frees them): what the program left alive.
  j["live"] = {{"contexts", static_cast<long>(g_live.size())}, {"level_comms", level_comms}, {"created", g_created}};
  return j.dump();
}

int keyval() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_keyval == MPI_KEYVAL_INVALID) {
    // Null copy function: a duplicate gets its own levels on first use, not a shared pointer.
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_context, &g_keyval, nullptr);
    static bool hooked = false;
    if (!hooked) {
      hooked = true;
      base::add_finalize_hook(on_finalize);
      base::add_report_section("topology", topology_report);
    }
  }
  return g_keyval;
}

}  // namespace

Context* context_of(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  const int kv = keyval();
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, kv, &attr, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<Context*>(attr);

  auto c = std::make_unique<Context>();
  c->comm = comm;
  int inter = 0, size = 1;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);  // an intercommunicator's local group
  int failed = 0;
  // This rank's GPU state, agreed as the largest over the ranks: a rank that would have to stage
  // (an MPI that is not GPU-aware) outweighs one that would hand device pointers to the MPI,
  // which outweighs one that could also run the local steps as the GPU module's kernels.
  enum : int { kNoRuntime = 0, kKernels = 1, kAwareMpi = 2, kStage = 3 };
  const device::Runtime rt = device::runtime();
  const bool aware = rt != device::Runtime::None && device::mpi_gpu_aware(rt, config::get().gpu_aware);
  c->device_module = aware && size > 1 && !inter && device_ops() != nullptr;
  int gpu = rt == device::Runtime::None ? kNoRuntime : !aware ? kStage : c->device_module ? kKernels : kAwareMpi;
  if (!inter && size > 1) c->levels = topo::build_levels(comm, config::get(), &failed, &gpu);
  c->device_to_mpi = c->levels && gpu == kAwareMpi;
  c->device_hier = c->levels && gpu == kKernels;
  if (failed) note_fallback(Acquire::Levels, failed == 2);
  const std::string desc = inter ? "intercommunicator (flat)"
                           : size == 1 ? "one rank (flat)"
                           : c->levels ? c->levels->shape.describe()
                           : failed    ? "level communicators failed (flat)"
                                       : "one level (flat)";
  if (c->levels) HIER_INFO("topo", "communicator of %d ranks: %s", size, desc.c_str());
  Context* raw = c.release();
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_live.push_back(raw);
    ++g_shapes[std::to_string(size) + " ranks: " + desc];
    ++g_created;
  }
  PMPI_Comm_set_attr(comm, kv, raw);
  return raw;
}

GpuPath gpu_path(MPI_Comm comm, bool* bind_device) {
  const Context* c = context_of(comm);
  *bind_device = c && c->device_hier && c->device_module;
  if (!c || !c->levels || c->device_to_mpi) return GpuPath::ToMpi;
  return c->device_hier ? GpuPath::DeviceHier : GpuPath::Host;
}

Census census() {
  std::lock_guard<std::mutex> lk(g_mu);
  Census n;
  for (Context* c : g_live) {
    ++n.contexts;
    if (c->levels) n.level_comms += c->levels->owned_count();
  }
  return n;
}

}  // namespace hier::exec
