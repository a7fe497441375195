// The progress engine of libhier's requests (exec/request.hpp): starting a request, advancing
// every outstanding one in the order of issue, retiring the finished ones, the progress thread.
// Persistent collectives: exec/persistent.cpp; what the program's completion calls and its
// blocking calls use: exec/request_completion.cpp.
#include "exec/request.hpp"
#include "exec/request_engine.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/hooks.hpp"
#include "device/module.hpp"
#include "diag/log.hpp"
#include "exec/own_progress.hpp"
#include "exec/prepare.hpp"
#include "util/inject.hpp"

namespace hier::exec {
namespace engine {

// Every outstanding request in the order the program started them. g_mu guards it, the
// contexts' request fields, every Machine and the persistent requests (exec/persistent.cpp);
// PMPI_Grequest_complete is called without it.
std::mutex g_mu;
std::vector<CollRequest*> g_active;
std::atomic<int> g_nactive{0};

// Handles of libhier's requests not yet freed by the MPI (MPI_Cancel asks). Its own lock: the
// MPI calls free_fn from inside its completion calls.
std::mutex g_hmu;
std::unordered_set<MPI_Request> g_handles;
std::atomic<double> g_wait_s{0};
std::atomic<bool> g_thread_on{false};  // g_thread runs (read without a lock by the p2p calls)

void add(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

}  // namespace engine
using namespace engine;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Report: per collective, requests and the seconds from start to completion; the seconds spent
// in completion calls while requests were outstanding.
struct Stat {
  std::atomic<uint64_t> requests{0}, groups{0};
  std::atomic<double> active_s{0};
};
std::array<Stat, static_cast<size_t>(config::Coll::Count)> g_stats;
std::atomic<uint64_t> g_thread_rounds{0};

std::string nonblocking_report() {
  nlohmann::json j = nlohmann::json::object();
  for (size_t c = 0; c < g_stats.size(); ++c)
    if (const uint64_t n = g_stats[c].requests.load())
      j[std::string("i") + config::kCollKeys[c]] = {
          {"requests", n}, {"groups", g_stats[c].groups.load()}, {"active_s", g_stats[c].active_s.load()}};
  j["wait_s"] = g_wait_s.load();
  j["progress"] = config::get().progress_mpi ? "thread+mpi" : config::get().progress_thread ? "thread" : "calls";
  j["thread_rounds"] = g_thread_rounds.load();
  // The MPI's own nonblocking collectives the thread advanced (exec/own_progress.hpp).
  j["mpi_requests_progressed"] = own_progress::tracked_total();
  j["mpi_progress_calls"] = own_progress::pokes_total();
  return j.dump();
}

}  // namespace
// What the MPI's generalized request keeps. Two owners: the MPI (until it calls free_fn, which
// MPICH does at MPI_Request_free even before completion, Open MPI once it is also complete)
// and libhier (until its PMPI_Grequest_complete returned); the last one deletes it.
struct Extra {
  int rc = MPI_SUCCESS;
  MPI_Request handle = MPI_REQUEST_NULL;
  std::atomic<int> owners{2};
  void drop() {
    if (owners.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};
namespace {
// The status of a completed collective request, as the MPIs give it for their own (measured:
// source 0, tag 0, no elements, not cancelled); MPI_ERROR comes from the return value.
int query_fn(void* extra, MPI_Status* st) {
  const int rc = static_cast<Extra*>(extra)->rc;
  PMPI_Status_set_elements(st, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(st, 0);
  st->MPI_SOURCE = 0;
  st->MPI_TAG = 0;
  return rc;
}
// extra: the request's return code, allocated at start, freed with the MPI's request.
int free_fn(void* extra) {
  auto* e = static_cast<Extra*>(extra);
  {
    std::lock_guard<std::mutex> hk(g_hmu);
    g_handles.erase(e->handle);
  }
  e->drop();
  return MPI_SUCCESS;
}
int cancel_fn(void*, int) { return MPI_SUCCESS; }  // never reached: core refuses MPI_Cancel first

// Whether r may start its next group: every older request on its context has issued all of
// its groups (the order of issue above).
bool may_issue(const CollRequest* r) {
  for (const CollRequest* q : g_active) {
    if (q == r) return true;
    if (q->ctx == r->ctx && !q->machine->issued_all()) return false;
  }
  return true;
}

// Whether r's side requests (CollRequest::side) are complete; tests them once. An error there
// is r's error (side_rc).
bool side_done(CollRequest* r) {
  if (r->side.empty()) return true;
  int flag = 0;
  if (const int rc = PMPI_Testall(static_cast<int>(r->side.size()), r->side.data(), &flag, MPI_STATUSES_IGNORE);
      rc != MPI_SUCCESS) {
    r->side_rc = rc;
    flag = 1;
  }
  if (flag) r->side.clear();
  return flag != 0;
}

// Advances r without waiting; true when its schedule is done (and its side requests).
bool advance(CollRequest* r) {
  Machine& m = *r->machine;
  // A request bound to device buffers works on their device, whichever thread advances it (the
  // program's in MPI_Wait / MPI_Test, or the progress thread), and leaves that thread's own.
  device::DeviceScope on(r->b.dev ? r->b.dev->device() : -1);
  for (;;) {
    if (m.in_flight() && !m.complete_group(false)) return false;
    if (m.done()) {
      // Device bindings: the last local steps' kernels (the user's blocks, a last copy) finish
      // before the request completes and the program reads its buffers. An error there is the
      // request's, reported like its side requests'.
      if (const int rc = m.flush(); rc != MPI_SUCCESS && r->side_rc == MPI_SUCCESS) r->side_rc = rc;
      return side_done(r);
    }
    if (!may_issue(r)) return false;
    m.start_group();
  }
}

}  // namespace

namespace {

// User-defined ops held by requests (hold_op): references per op, and whether the program has
// freed it already (its MPI_Op_free deferred). Its own lock: MPI_Op_free takes it from any
// thread, and release_op runs under g_mu too (g_mu, then g_op_mu; never the other way).
struct OpRefs {
  int refs = 0;
  bool freed = false;  // the program's MPI_Op_free came while referenced: the last release frees it
};
std::mutex g_op_mu;
std::unordered_map<MPI_Op, OpRefs> g_ops;

// Drops r's reference to its op; frees the op once the last one goes after the program freed it.
void release_op(CollRequest* r) {
  MPI_Op op = r->held_op;
  if (op == MPI_OP_NULL) return;
  r->held_op = MPI_OP_NULL;
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lk(g_op_mu);
    auto it = g_ops.find(op);
    if (it == g_ops.end() || --it->second.refs > 0) return;
    free_now = it->second.freed;
    g_ops.erase(it);
  }
  if (free_now) PMPI_Op_free(&op);
}

}  // namespace

void hold_op(CollRequest& r) {
  const MPI_Op op = r.b.op;
  if (op == MPI_OP_NULL || r.held_op != MPI_OP_NULL || predefined_op(op) || op == MPI_REPLACE || op == MPI_NO_OP)
    return;
  std::lock_guard<std::mutex> lk(g_op_mu);
  ++g_ops[op].refs;
  r.held_op = op;
}

bool defer_op_free(MPI_Op op) {
  if (op == MPI_OP_NULL) return false;
  std::lock_guard<std::mutex> lk(g_op_mu);
  auto it = g_ops.find(op);
  if (it == g_ops.end() || it->second.freed) return false;
  it->second.freed = true;
  return true;
}

namespace {

// Under g_mu: a finished request gives back its memory; returns its code.
int retire(CollRequest* r) {
  int rc = r->machine->rc();
  if (rc == MPI_SUCCESS) rc = r->side_rc;
  r->side_rc = MPI_SUCCESS;
  if (rc == MPI_SUCCESS && r->after) rc = r->after();
  r->extra->rc = rc;
  Context* ctx = r->ctx;
  --ctx->requests;
  if (!r->mem) ctx->memory_lent = false;
  else if (!r->owner) ctx->request_memory.push_back(std::move(r->mem));
  if (r->owner) r->owner->running = false;
  Stat& s = g_stats[static_cast<size_t>(r->coll)];
  s.groups.fetch_add(r->machine->groups_started(), std::memory_order_relaxed);
  add(s.active_s, now() - r->t_start);
  if (r->trace_id) diag::trace::async_end(r->trace_id, r->trace_fn);
  r->trace_id = 0;
  if (!r->owner) release_held(r);
  return rc;
}

}  // namespace

namespace engine {

void release_held(CollRequest* r) {
  for (MPI_Datatype& d : r->dups) PMPI_Type_free(&d);
  r->dups.clear();
  release_op(r);
}

// Advances every request; completes (outside the lock) the handles of those that finished.
// Returns how many level-step groups it started plus how many requests it completed (0: the
// round found every request still waiting on its group in flight).
size_t progress_round() {
  std::vector<std::pair<MPI_Request, Extra*>> done;
  // (declared first, deleted last: after the requests in `gone` that ran on them)
  std::vector<std::unique_ptr<Context>> orphans;  // contexts of freed communicators no request holds now
  std::vector<std::unique_ptr<CollRequest>> gone;
  size_t moved = 0;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (size_t i = 0; i < g_active.size(); ++i) {
      CollRequest* r = g_active[i];
      const size_t groups_before = r->machine->groups_started();
      const bool finished = advance(r);
      moved += r->machine->groups_started() - groups_before;
      if (!finished) continue;
      ++moved;
      const int rc = retire(r);
      (void)rc;  // in r->extra: the MPI reads it through query_fn
      done.emplace_back(r->handle, r->extra);
      if (!r->owner) {
        gone.emplace_back(r);
      } else if (r->owner->freed) {  // freed by the program while it ran: nothing waits for it
        Persistent* o = r->owner;
        release_held(r);
        if (r->mem) r->ctx->request_memory.push_back(std::move(r->mem));
        if (Context* c = drop_context(r)) orphans.emplace_back(c);
        gone.push_back(std::move(o->r));
        delete o;
      }
      g_active.erase(g_active.begin() + static_cast<std::ptrdiff_t>(i));
      --i;
      g_nactive.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  // The code reaches the program through query_fn (the completion call's return value).
  for (auto& [h, extra] : done) {
    PMPI_Grequest_complete(h);
    extra->drop();
  }
  return moved;
}

}  // namespace engine

namespace {

// The progress thread (HIER_PROGRESS=thread, MPI_THREAD_MULTIPLE only).
struct ProgressThread {
  std::thread th;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};
ProgressThread* g_thread = nullptr;
std::once_flag g_thread_once;

void thread_main(ProgressThread* t) {
  diag::trace::name_thread("libhier progress");  // its own track in HIER_TRACE
  std::chrono::microseconds pause{50};
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(t->mu);
      // libhier's requests, or the MPI's own nonblocking collectives (exec/own_progress.hpp).
      t->cv.wait(lk, [t] { return t->stop || g_nactive.load() > 0 || own_progress::wanted(); });
      if (t->stop && g_nactive.load() == 0) return;
    }
    const size_t moved = g_nactive.load() > 0 ? progress_round() : 0;
    g_thread_rounds.fetch_add(1, std::memory_order_relaxed);
    // The ranks share few cores: poll often, not continuously. While a round moves nothing (a
    // large transfer in flight), the pause doubles up to kMaxPause: each poll is an MPI progress
    // call whose CPU time the program's computation loses. An RDMA transfer runs without polls;
    // over TCP each poll refills the socket buffers (hundreds of KB: 1 ms of a 1 Gbit/s link is
    // 125 KB). Any movement (a group started, a request completed) returns to the short pause.
    constexpr auto kMinPause = std::chrono::microseconds(50), kMaxPause = std::chrono::microseconds(1000);
    pause = moved ? kMinPause : std::min(kMaxPause, pause * 2);
    // Only the MPI's own requests to advance: one poke per kOwnPause. Measured on the emulated
    // cluster (bench/RESULTS.md, "Nonblocking calls: libhier's schedule against the MPI's own, and
    // progress for the MPI's own"): pokes every 0.2 ms took the computation's CPU (22-52 % of a
    // 16 MiB MPI_Iallreduce hidden), every 2 ms hid 62-90 %, every 4 ms 67-80 %, the bare call
    // unchanged.
    // (A request of libhier's started meanwhile ends that pause: launch wakes the thread.)
    constexpr auto kOwnPause = std::chrono::microseconds(4000);
    if (g_nactive.load() == 0) {
      std::unique_lock<std::mutex> lk(t->mu);
      t->cv.wait_for(lk, kOwnPause, [t] { return t->stop || g_nactive.load() > 0; });
    } else {
      std::this_thread::sleep_for(pause);
    }
    // The MPI's own requests after the pause: a program that waits at once (MPI_Wait right after
    // the start) progresses them itself, and is not slowed by a second thread in the MPI then.
    if (own_progress::wanted()) own_progress::poke();
  }
}

void drain_all();

void at_finalize() {
  if (g_thread) {
    g_thread_on.store(false);
    drain_all();
    {
      std::lock_guard<std::mutex> lk(g_thread->mu);
      g_thread->stop = true;
    }
    g_thread->cv.notify_all();
    g_thread->th.join();
    delete g_thread;
    g_thread = nullptr;
  }
  drain_all();  // requests the program freed while active complete here, at the latest
}

}  // namespace

namespace engine {

void setup_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    base::add_report_section("nonblocking", nonblocking_report);
    base::add_finalize_hook(at_finalize);
  });
  if (!config::get().progress_thread) return;
  std::call_once(g_thread_once, [] {
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) {
      HIER_WARN("exec", "HIER_PROGRESS=thread needs MPI_THREAD_MULTIPLE (the program has thread level %d): "
                        "nonblocking collectives progress in MPI_Wait/MPI_Test and other MPI calls instead", level);
      return;
    }
    g_thread = new ProgressThread();
    g_thread->th = std::thread(thread_main, g_thread);
    g_thread_on.store(true);
  });
}

bool active_on(Context* ctx) {
  std::lock_guard<std::mutex> lk(g_mu);
  return ctx->requests > 0;
}

}  // namespace engine

void engine::wake_thread() {
  if (!g_thread) return;
  { std::lock_guard<std::mutex> lk(g_thread->mu); }
  g_thread->cv.notify_one();
}

namespace {

void drain_all() {
  while (g_nactive.load() > 0) {
    progress_round();
    std::this_thread::yield();
  }
}

}  // namespace

void hold_type(CollRequest& r, TypeInfo& t) {
  if (util::injected_failure("type_hold")) return;  // test-only: the program's handle, unheld
  int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
  if (t.type == MPI_DATATYPE_NULL || PMPI_Type_get_envelope(t.type, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
      combiner == MPI_COMBINER_NAMED)
    return;
  MPI_Datatype d = MPI_DATATYPE_NULL;
  if (PMPI_Type_dup(t.type, &d) != MPI_SUCCESS) return;  // the program's own handle then
  r.dups.push_back(d);
  t.type = d;
}

char* request_scratch(CollRequest& r, int64_t scratch_bytes, const TypeInfo* info) {
  Context* ctx = r.ctx;
  const bool dev = r.b.dev != nullptr;  // bound to device buffers (bind_device): device memory
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!ctx->request_memory.empty()) {
      r.mem = std::move(ctx->request_memory.back());
      ctx->request_memory.pop_back();
    }
  }
  try {
    if (!r.mem) r.mem = std::make_unique<RequestMemory>();
    if (dev && r.mem->device != r.b.dev->device()) {  // device memory of another device: made anew
      r.mem->dscratch = Scratch{Loc::Device};
      r.mem->dtmp = ScratchSet{Loc::Device};
      r.mem->device = r.b.dev->device();
    }
    ScratchSet& tmp = dev ? r.mem->dtmp : r.mem->tmp;
    char* m = (dev ? r.mem->dscratch : r.mem->scratch).get(static_cast<size_t>(scratch_bytes));
    // (staged device bindings: the message steps' host copies too, exec/device_stage.hpp)
    if (m && reserve(*r.sched, *ctx->levels, info, &tmp) &&
        (!r.b.stage || reserve_stage(r.mem->stage, r.mem->tmp, *ctx, *r.sched, info))) {
      r.b.tmp = &tmp;
      if (r.b.stage) {
        r.b.stage = &r.mem->stage;
        r.b.stage_tmp = &r.mem->tmp;
      }
      return m;
    }
  } catch (...) {
  }
  // Failed here: run on the context's own memory, reserved and agreed at the miss, once
  // nothing else on this context runs on it.
  r.mem.reset();
  HIER_INFO("exec", "nonblocking %s: no memory of its own; waits for the requests before it",
            config::kCollKeys[static_cast<size_t>(r.coll)]);
  drain(ctx);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    ctx->memory_lent = true;
  }
  if (!dev) {
    r.b.tmp = &ctx->tmp;
    return ctx->scratch.get(static_cast<size_t>(scratch_bytes));
  }
  Context::DeviceSide& side = ctx->on_device(r.b.dev->device());
  r.b.tmp = &side.dtmp;
  return side.dscratch.get(static_cast<size_t>(scratch_bytes));
}

namespace engine {

// Starts r (owned by the caller until it is in g_active): a generalized request for the
// program, a fresh machine, the first group issued where the order allows.
int launch(CollRequest* r, MPI_Request* out) {
  setup_once();
  if (r->before)
    if (int rc = r->before(); rc != MPI_SUCCESS) return rc;
  auto* extra = new Extra();
  MPI_Request h = MPI_REQUEST_NULL;
  if (int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, &h); rc != MPI_SUCCESS) {
    delete extra;
    if (!r->side.empty()) {  // started by `before` on every rank: completed, not abandoned
      PMPI_Waitall(static_cast<int>(r->side.size()), r->side.data(), MPI_STATUSES_IGNORE);
      r->side.clear();
    }
    return rc;
  }
  r->handle = h;
  r->extra = extra;
  extra->handle = h;
  r->machine = std::make_unique<Machine>(*r->sched, *r->ctx->levels, r->b, true);
  if (diag::trace::g_on) {  // HIER_TRACE: an async slice from here to retire()
    r->trace_id = diag::trace::note_run(r->sched->name.c_str());
    r->trace_fn = diag::trace::async_begin(r->trace_id);
    r->machine->trace_as(r->trace_id, true);
  }
  r->t_start = now();
  g_stats[static_cast<size_t>(r->coll)].requests.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> hk(g_hmu);
    g_handles.insert(h);
  }
  {
    std::lock_guard<std::mutex> lk(g_mu);
    ++r->ctx->requests;
    if (!r->mem) r->ctx->memory_lent = true;
    g_active.push_back(r);
    g_nactive.fetch_add(1, std::memory_order_relaxed);
  }
  *out = h;
  progress_round();  // issues the first group at once where the order allows
  wake_thread();
  return MPI_SUCCESS;
}

}  // namespace engine

int start_request(std::unique_ptr<CollRequest> r, MPI_Request* out) {
  hold_op(*r);  // released with the datatypes (release_held): at completion, or a persistent one's free
  if (persistent_init_scope()) return make_persistent(std::move(r), out);  // MPI_*_init: kept, started by MPI_Start
  CollRequest* raw = r.get();
  const int rc = launch(raw, out);
  if (rc != MPI_SUCCESS) {
    std::lock_guard<std::mutex> lk(g_mu);
    if (raw->mem) raw->ctx->request_memory.push_back(std::move(raw->mem));
    release_held(raw);
    return rc;
  }
  r.release();  // g_active owns it now
  return MPI_SUCCESS;
}

}  // namespace hier::exec
