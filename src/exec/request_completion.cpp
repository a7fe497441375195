// What the program's completion calls (MPI_Wait, MPI_Test, ...: core/dispatch_request.hpp),
// its blocking calls and the point-to-point wrappers ask of the progress engine
// (exec/request.cpp): whether libhier has requests outstanding, and advancing or completing them.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "exec/request.hpp"
#include "exec/request_engine.hpp"

namespace hier::exec {
using namespace engine;

bool requests_active() { return g_nactive.load(std::memory_order_relaxed) > 0; }

bool calls_must_progress() { return requests_active() && !g_thread_on.load(std::memory_order_relaxed); }

void progress() {
  if (requests_active()) progress_round();
}

void drain(Context* ctx) {
  while (active_on(ctx)) {
    progress_round();
    std::this_thread::yield();
  }
}

void before_call(Context* ctx, bool nonblocking) {
  if (!requests_active()) return;
  bool wait;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    wait = ctx->requests > 0 && (!nonblocking || ctx->memory_lent);
  }
  if (wait) drain(ctx);
}

bool unfinished(int n, const MPI_Request* r) {
  if (!requests_active()) return false;
  std::lock_guard<std::mutex> lk(g_mu);
  for (const CollRequest* q : g_active)
    if (std::find(r, r + n, q->handle) != r + n) return true;
  return false;
}

bool is_collective_request(MPI_Request r) {
  if (r == MPI_REQUEST_NULL) return false;
  std::lock_guard<std::mutex> hk(g_hmu);
  return g_handles.count(r) != 0;
}

bool when_complete(MPI_Request h, std::function<int()> after) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = std::find_if(g_active.begin(), g_active.end(), [h](const CollRequest* r) { return r->handle == h; });
  if (it == g_active.end() || (*it)->owner) return false;
  CollRequest& r = **it;
  r.after = [a = std::move(after), own = std::move(r.after)] {
    const int rc = own ? own() : MPI_SUCCESS;
    return rc != MPI_SUCCESS ? rc : a();
  };
  return true;
}

void note_wait(double seconds) { add(g_wait_s, seconds); }

}  // namespace hier::exec
