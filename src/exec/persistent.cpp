// Persistent collectives (MPI_Allreduce_init, ...; exec/request.hpp): the request kept between
// starts, MPI_Start, MPI_Request_free, and the swap of a started handle for the generalized
// request of its current start around the program's completion calls. Each start runs on the
// progress engine (exec/request.cpp) like any other request.
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "exec/request.hpp"
#include "exec/request_engine.hpp"

namespace hier::exec {
using namespace engine;
namespace {

std::unordered_map<MPI_Request, Persistent*> g_persist;  // under g_mu
std::atomic<int> g_nstarted{0};
thread_local int tl_persistent_init = 0;

}  // namespace

namespace engine {

int make_persistent(std::unique_ptr<CollRequest> r, MPI_Request* out) {
  setup_once();
  auto* o = new Persistent();
  // The program's handle: an MPI persistent request that is never started (so inactive, as an
  // MPI_*_init's request is, for every call libhier does not intercept). Addressed to this rank
  // on MPI_COMM_SELF, not to MPI_PROC_NULL: freeing a persistent MPI_PROC_NULL request makes
  // MPICH 4.0.2's own persistent collectives created after it hang in their first MPI_Wait
  // (without libhier too; tests/nonblocking's Persistent.MpiOwnAfterLibhiersFreed).
  if (int rc = PMPI_Send_init(nullptr, 0, MPI_BYTE, 0, 0, MPI_COMM_SELF, &o->handle); rc != MPI_SUCCESS) {
    delete o;
    release_held(r.get());
    return rc;
  }
  r->owner = o;
  o->r = std::move(r);
  std::lock_guard<std::mutex> lk(g_mu);
  ++o->r->ctx->persistent;
  g_persist[o->handle] = o;
  *out = o->handle;
  return MPI_SUCCESS;
}

Context* drop_context(CollRequest* r) {
  Context* c = r->ctx;
  return --c->persistent == 0 && c->orphaned ? c : nullptr;
}

}  // namespace engine

bool has_persistent(Context* ctx) {
  std::lock_guard<std::mutex> lk(g_mu);
  return ctx->persistent > 0;
}

bool kept_by_persistent(Context* ctx) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (ctx->persistent == 0) return false;
  ctx->orphaned = true;
  return true;
}

PersistentInit::PersistentInit() { ++tl_persistent_init; }
PersistentInit::~PersistentInit() { --tl_persistent_init; }

bool persistent_init_scope() { return tl_persistent_init > 0; }

bool is_persistent(MPI_Request h) {
  if (h == MPI_REQUEST_NULL) return false;
  std::lock_guard<std::mutex> lk(g_mu);
  return g_persist.count(h) != 0;
}

bool persistent_started() { return g_nstarted.load(std::memory_order_relaxed) > 0; }

int start_persistent(MPI_Request h) {
  Persistent* o;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_persist.find(h);
    if (it == g_persist.end()) return MPI_ERR_REQUEST;
    o = it->second;
    if (o->started) return MPI_ERR_REQUEST;  // started twice without completion: erroneous
  }
  // Runs on the context's own memory (its allocation failed at init): nothing else may then.
  if (!o->r->mem) before_call(o->r->ctx, false);
  o->r->machine.reset();
  {
    std::lock_guard<std::mutex> lk(g_mu);
    o->started = o->running = true;
  }
  g_nstarted.fetch_add(1, std::memory_order_relaxed);
  const int rc = launch(o->r.get(), &o->current);
  if (rc != MPI_SUCCESS) {
    std::lock_guard<std::mutex> lk(g_mu);
    o->started = o->running = false;
    g_nstarted.fetch_sub(1, std::memory_order_relaxed);
  }
  return rc;
}

int free_persistent(MPI_Request* h) {
  Persistent* o;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_persist.find(*h);
    if (it == g_persist.end()) return MPI_ERR_REQUEST;
    o = it->second;
    g_persist.erase(it);
    if (o->started) {
      o->started = false;
      g_nstarted.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  // A start still running completes on its own (progressed by later calls, at the latest
  // MPI_Finalize); its generalized request is released to the MPI now.
  if (o->current != MPI_REQUEST_NULL) PMPI_Request_free(&o->current);
  bool running;
  Context* orphan = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    running = o->running;
    if (running) {
      o->freed = true;
    } else {
      if (o->r->mem) o->r->ctx->request_memory.push_back(std::move(o->r->mem));
      orphan = drop_context(o->r.get());
    }
  }
  if (!running) {
    release_held(o->r.get());
    delete o;
  }
  delete orphan;  // its communicator was freed before this last request on it
  return PMPI_Request_free(h);
}

int wrap_persistent(MPI_Request h, std::function<int()> before, std::function<int()> after) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_persist.find(h);
  if (it == g_persist.end() || it->second->started) return MPI_ERR_REQUEST;
  CollRequest& r = *it->second->r;
  r.before = [b = std::move(before), own = std::move(r.before)] {
    const int rc = b();
    return rc != MPI_SUCCESS || !own ? rc : own();
  };
  r.after = [a = std::move(after), own = std::move(r.after)] {
    const int rc = own ? own() : MPI_SUCCESS;
    return rc != MPI_SUCCESS ? rc : a();
  };
  return MPI_SUCCESS;
}

MPI_Request* swap_in(int n, MPI_Request* r, std::vector<MPI_Request>& tmp) {
  if (!persistent_started()) return r;
  tmp.assign(r, r + n);
  bool any = false;
  std::lock_guard<std::mutex> lk(g_mu);
  for (int i = 0; i < n; ++i) {
    auto it = g_persist.find(r[i]);
    if (it != g_persist.end() && it->second->started) {
      tmp[i] = it->second->current;
      any = true;
    }
  }
  if (!any) {
    tmp.clear();
    return r;
  }
  return tmp.data();
}

void swap_out(int n, MPI_Request* r, std::vector<MPI_Request>& tmp) {
  if (tmp.empty()) return;
  std::lock_guard<std::mutex> lk(g_mu);
  for (int i = 0; i < n; ++i) {
    auto it = g_persist.find(r[i]);
    if (it != g_persist.end() && it->second->started) {
      Persistent* o = it->second;
      if (tmp[i] == MPI_REQUEST_NULL) {  // this start completed: the handle is inactive again
        o->current = MPI_REQUEST_NULL;
        o->started = false;
        g_nstarted.fetch_sub(1, std::memory_order_relaxed);
      }
      continue;  // the program keeps its persistent handle
    }
    r[i] = tmp[i];
  }
  tmp.clear();
}

}  // namespace hier::exec
