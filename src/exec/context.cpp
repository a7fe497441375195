#include "exec/context.hpp"

#include <atomic>
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

std::mutex g_contexts_mu;
int g_keyval = MPI_KEYVAL_INVALID;
std::vector<Context*> g_live;                 // for the finalize hook and the census
std::map<std::string, long> g_shapes;          // report: shape description -> communicators
long g_created = 0;                            // report: contexts ever created
// The communicator entered last (a one-entry cache of "its context exists", so that entering
// costs one load on the hot path); cleared when that context is deleted, since a freed
// handle can come back for a new communicator.
std::atomic<MPI_Comm> g_entered{MPI_COMM_NULL};

void unregister(Context* c) {
  std::lock_guard<std::mutex> lk(g_contexts_mu);
  std::erase(g_live, c);
}

int delete_context(MPI_Comm comm, int, void* attr, void*) {
  auto* c = static_cast<Context*>(attr);
  MPI_Comm entered = comm;
  g_entered.compare_exchange_strong(entered, MPI_COMM_NULL);
  unregister(c);
  drain(c);  // nonblocking requests still running here complete first (MPI_Comm_free allows them)
  if (kept_by_persistent(c)) return MPI_SUCCESS;  // deleted with the last persistent request made here
  delete c;  // frees the level communicators
  return MPI_SUCCESS;
}

// At MPI_Finalize (before PMPI_Finalize): delete the attribute of every communicator still
// alive (MPI_COMM_WORLD, communicators the program never freed), which frees their levels.
void on_finalize() {
  std::vector<MPI_Comm> comms;
  int keyval;
  {
    std::lock_guard<std::mutex> lk(g_contexts_mu);
    for (Context* c : g_live) comms.push_back(c->comm);
    keyval = g_keyval;
  }
  for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, keyval);
  std::lock_guard<std::mutex> lk(g_contexts_mu);
  if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
  g_keyval = MPI_KEYVAL_INVALID;
}

std::string topology_report() {
  std::lock_guard<std::mutex> lk(g_contexts_mu);
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
  std::lock_guard<std::mutex> lk(g_contexts_mu);
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

bool may_rewrite_any() {
  const config::Config& cfg = config::get();
  for (size_t c = 0; c < static_cast<size_t>(config::Coll::Count); ++c)
    if (cfg.algo_for(static_cast<config::Coll>(c)) != config::Algo::Flat) return true;
  return false;
}

Context* find(MPI_Comm comm, int kv) {
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, kv, &attr, &found) != MPI_SUCCESS || !found) return nullptr;
  return static_cast<Context*>(attr);
}

// Every rank reaches this at its first collective on `comm`, whichever collective that is (enter):
// the shadow duplicate is libhier's only traffic on the user's communicator, so a rank that
// builds the levels later, when another rank does not (a program that calls different
// collectives on different ranks), waits on the shadow and never crosses the user's messages.
// Keys of contexts (Context::key): the largest this process has seen.
std::atomic<uint64_t> g_key_seq{0};

// PMPI_Comm_dup with the error returned, not raised on `comm` (its handler restored after).
int dup_returning(MPI_Comm comm, MPI_Comm* out) {
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  const bool swapped = PMPI_Comm_get_errhandler(comm, &eh) == MPI_SUCCESS;
  if (swapped) PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int rc = PMPI_Comm_dup(comm, out);
  if (swapped) {
    PMPI_Comm_set_errhandler(comm, eh);
    PMPI_Errhandler_free(&eh);
  }
  return rc;
}

// Whether rc may say the MPI ran out of communicators: MPICH's "Too many communicators" is of
// class MPI_ERR_OTHER (argument errors have classes of their own).
bool out_of_comms(int rc) {
  int cls = MPI_ERR_OTHER;
  PMPI_Error_class(rc, &cls);
  return cls == MPI_ERR_OTHER;
}

Context* create(MPI_Comm comm, int kv) {
  auto c = std::make_unique<Context>();
  c->comm = comm;
  int inter = 0, size = 1;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);  // an intercommunicator's local group
  c->flat_only = inter || size == 1;
  if (!c->flat_only) {
    // Out of communicators (MPICH's context IDs): idle contexts are released and the dup tried
    // again; failing that, the communicator runs the MPI's own algorithms (flat). The program's
    // error handler is not called for libhier's own dup (collective: every rank fails alike).
    int rc = dup_returning(comm, &c->internal);
    if (rc != MPI_SUCCESS && out_of_comms(rc) && release_idle(comm) > 0) rc = dup_returning(comm, &c->internal);
    if (rc != MPI_SUCCESS) {
      c->internal = MPI_COMM_NULL;
      c->flat_only = true;
      note_fallback(Acquire::Levels, true);  // counted in the report's fallbacks; the first one warns
    } else {
      PMPI_Comm_set_errhandler(c->internal, MPI_ERRORS_RETURN);
      // The context's key: larger than every key this rank holds, the same on every rank.
      uint64_t k = g_key_seq.load() + 1;
      if (PMPI_Allreduce(MPI_IN_PLACE, &k, 1, MPI_UINT64_T, MPI_MAX, c->internal) == MPI_SUCCESS) {
        c->key = k;
        uint64_t seen = g_key_seq.load();
        while (seen < k && !g_key_seq.compare_exchange_weak(seen, k)) {
        }
      }
    }
  }
  Context* raw = c.release();
  {
    std::lock_guard<std::mutex> lk(g_contexts_mu);
    g_live.push_back(raw);
    ++g_created;
  }
  PMPI_Comm_set_attr(comm, kv, raw);
  return raw;
}

// The levels, built on the first call that may be rewritten (on the shadow, never on `comm`).
void build(Context* c) {
  c->built = true;
  int size = 1, inter = 0;
  PMPI_Comm_size(c->comm, &size);
  PMPI_Comm_test_inter(c->comm, &inter);
  int failed = 0;
  // This rank's GPU state, agreed as the largest over the ranks: a rank that would have to copy
  // whole buffers (an MPI that is not GPU-aware, no GPU module) outweighs one that would stage
  // the message steps of device-bound schedules (not GPU-aware, with the module), which
  // outweighs one that would hand device pointers to the MPI, which outweighs one that could
  // also run the local steps as the GPU module's kernels (GPU-aware, with the module).
  enum : int { kNoRuntime = 0, kKernels = 1, kAwareMpi = 2, kStageKernels = 3, kStage = 4 };
  const device::Runtime rt = device::runtime();
  const bool aware = rt != device::Runtime::None && device::mpi_gpu_aware(rt, config::get().gpu_aware);
  c->device_module = rt != device::Runtime::None && !c->flat_only && device_ops() != nullptr;
  int gpu = rt == device::Runtime::None ? kNoRuntime
            : aware                     ? (c->device_module ? kKernels : kAwareMpi)
                                        : (c->device_module ? kStageKernels : kStage);
  if (!c->flat_only) c->levels = topo::build_levels(c->internal, config::get(), &failed, &gpu);
  c->device_to_mpi = c->levels && gpu == kAwareMpi;
  c->device_hier = c->levels && (gpu == kKernels || gpu == kStageKernels);
  c->device_stage = c->levels && gpu == kStageKernels;
  if (failed) note_fallback(Acquire::Levels, failed == 2);
  const std::string desc = inter ? "intercommunicator (flat)"
                           : size == 1 ? "one rank (flat)"
                           : c->levels ? c->levels->shape.describe()
                           : failed    ? "level communicators failed (flat)"
                                       : "one level (flat)";
  if (c->levels) HIER_INFO("topo", "communicator of %d ranks: %s", size, desc.c_str());
  std::lock_guard<std::mutex> lk(g_contexts_mu);
  ++g_shapes[std::to_string(size) + " ranks: " + desc];
}

}  // namespace

Context::DeviceSide& Context::on_device(int d, bool with_ops) {
  std::lock_guard<std::mutex> lk(devices_mu_);
  DeviceSide& side = devices_[d];
  if (with_ops && !side.ops_tried && device_module) {
    side.ops_tried = true;
    side.ops = DeviceOps::make(d);
  }
  return side;
}

Context::~Context() {
  levels.reset();  // the level communicators first: they were made from the shadow
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (internal != MPI_COMM_NULL && !finalized) PMPI_Comm_free(&internal);
}

void enter(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || comm == g_entered.load(std::memory_order_relaxed)) return;
  if (may_rewrite_any()) {  // otherwise nothing will ever be built here: no shadow either
    const int kv = keyval();
    void* attr = nullptr;
    int found = 0;
    // Not a communicator: nothing is created; the MPI's own call reports the error.
    if (PMPI_Comm_get_attr(comm, kv, &attr, &found) != MPI_SUCCESS) return;
    if (!found) create(comm, kv);
  }
  g_entered.store(comm, std::memory_order_relaxed);
}

Context* context_of(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  const int kv = keyval();
  Context* c = find(comm, kv);
  if (!c) c = create(comm, kv);  // a caller that did not enter first (every rank alike)
  if (!c->built) build(c);
  return c;
}

GpuPath gpu_path(MPI_Comm comm, bool* bind_device) {
  const Context* c = context_of(comm);
  *bind_device = c && c->device_hier && c->device_module;
  if (!c || !c->levels || c->device_to_mpi) return GpuPath::ToMpi;
  if (!c->device_hier) return GpuPath::Host;
  return c->device_stage ? GpuPath::DeviceStaged : GpuPath::DeviceHier;
}

int release_idle(MPI_Comm parent) {
  int inter = 1;
  if (parent == MPI_COMM_NULL || PMPI_Comm_test_inter(parent, &inter) != MPI_SUCCESS || inter) return 0;
  const int kv = keyval();
  MPI_Group gp;
  PMPI_Comm_group(parent, &gp);
  std::vector<Context*> mine;
  {
    std::lock_guard<std::mutex> lk(g_contexts_mu);
    mine = g_live;
  }
  // This rank's candidates, by key, and whether it must keep each (persistent requests).
  std::vector<uint64_t> offer;  // key << 1 | keep
  std::map<uint64_t, Context*> by_key;
  for (Context* c : mine) {
    if (c->internal == MPI_COMM_NULL || c->key == 0) continue;
    MPI_Group gc;
    if (PMPI_Comm_group(c->comm, &gc) != MPI_SUCCESS) continue;
    int n = 0;
    PMPI_Group_size(gc, &n);
    std::vector<int> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = i;
    bool inside = PMPI_Group_translate_ranks(gc, n, in.data(), gp, out.data()) == MPI_SUCCESS;
    for (int i = 0; inside && i < n; ++i) inside = out[i] != MPI_UNDEFINED;
    PMPI_Group_free(&gc);
    if (!inside) continue;
    drain(c);  // every rank of c is in this call, draining too: its requests complete
    by_key[c->key] = c;
    offer.push_back(c->key << 1 | (has_persistent(c) ? 1 : 0));
  }
  PMPI_Group_free(&gp);
  // Agreed over `parent` (every rank is in this call after the same failure): a context goes
  // where no rank keeps it.
  int size = 1;
  PMPI_Comm_size(parent, &size);
  int n = static_cast<int>(offer.size());
  std::vector<int> counts(size), displs(size);
  if (PMPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, parent) != MPI_SUCCESS) return 0;
  int total = 0;
  for (int i = 0; i < size; ++i) {
    displs[i] = total;
    total += counts[i];
  }
  std::vector<uint64_t> all(static_cast<size_t>(total));
  if (PMPI_Allgatherv(offer.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T,
                      parent) != MPI_SUCCESS)
    return 0;
  std::map<uint64_t, bool> keep;
  for (uint64_t e : all) keep[e >> 1] = keep[e >> 1] || (e & 1);
  int released = 0;
  for (const auto& [key, kept] : keep) {
    if (kept) continue;
    ++released;  // counted on every rank alike, member of that communicator or not
    auto it = by_key.find(key);
    if (it != by_key.end()) PMPI_Comm_delete_attr(it->second->comm, kv);  // delete_context: frees its communicators
  }
  if (released > 0)
    HIER_INFO("exec", "out of communicators: released libhier's communicators of %d idle communicators", released);
  return released;
}

Census census() {
  std::lock_guard<std::mutex> lk(g_contexts_mu);
  Census n;
  for (Context* c : g_live) {
    ++n.contexts;
    if (c->levels) n.level_comms += c->levels->owned_count();
  }
  return n;
}

}  // namespace hier::exec
