// A communicator's watch state (application threads): its identity shared by all members (a
// hash of the world ranks of its members and how many communicators with the same members this
// rank saw before it), kept as an attribute of the communicator, and its sequence numbers.
#include <time.h>

#include <map>
#include <mutex>
#include <vector>

#include "diag/hang_report.hpp"
#include "diag/watch_state.hpp"
#include "hier/fn.hpp"
#include "util/fnv.hpp"

namespace hier::diag {

namespace {

constexpr int kMaxComms = 4096;

struct Comms {
  int keyval = MPI_KEYVAL_INVALID;
  std::mutex mu;  // creation of CommWatch
  CommWatch* comms[kMaxComms] = {};
  std::atomic<int> n_comms{0};
  std::map<uint64_t, int> ordinal;  // members hash -> how many communicators seen with it
  std::atomic<uint64_t> epoch{1};  // bumped when a watched communicator is freed
};

Comms* g = nullptr;  // never freed: the watchdog thread may outlive finalize at exit

thread_local MPI_Comm tl_last_comm __attribute__((tls_model("initial-exec"))) = MPI_COMM_NULL;
thread_local CommWatch* tl_last_watch __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local uint64_t tl_last_epoch __attribute__((tls_model("initial-exec"))) = 0;
// The number the flight recorder gave this thread's call in progress (watch_number_call).
thread_local CommWatch* tl_numbered_comm __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local uint64_t tl_numbered_seq __attribute__((tls_model("initial-exec"))) = 0;

int delete_attr(MPI_Comm, int, void* val, void*) {
  auto* w = static_cast<CommWatch*>(val);
  if (w) w->freed.store(true);
  if (g) g->epoch.fetch_add(1);
  return MPI_SUCCESS;
}

CommWatch* create_watch(MPI_Comm comm) {
  auto* w = new CommWatch();
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (!inter) {
    MPI_Group grp, wgrp;
    PMPI_Comm_group(comm, &grp);
    PMPI_Comm_group(MPI_COMM_WORLD, &wgrp);
    PMPI_Group_size(grp, &w->size);
    std::vector<int> ranks(static_cast<size_t>(w->size));
    for (int i = 0; i < w->size; ++i) ranks[static_cast<size_t>(i)] = i;
    w->world.assign(static_cast<size_t>(w->size), MPI_UNDEFINED);
    PMPI_Group_translate_ranks(grp, w->size, ranks.data(), wgrp, w->world.data());
    PMPI_Group_free(&grp);
    PMPI_Group_free(&wgrp);
    const uint64_t h = util::fnv1a(w->world.data(), w->world.size() * sizeof(int));
    std::lock_guard<std::mutex> lk(g->mu);
    const int ord = g->ordinal[h]++;
    w->key = util::fnv1a(&ord, sizeof ord, h) | 1;
    const int n = g->n_comms.load();
    if (n < kMaxComms) {
      g->comms[n] = w;
      g->n_comms.store(n + 1, std::memory_order_release);
    }
  }
  PMPI_Comm_set_attr(comm, g->keyval, w);
  return w;
}

CommWatch* watch_of(MPI_Comm comm) {
  const uint64_t ep = g->epoch.load(std::memory_order_relaxed);
  if (comm == tl_last_comm && ep == tl_last_epoch) return tl_last_watch;
  void* v = nullptr;
  int found = 0;
  // An invalid handle (the call itself then fails in the MPI): no state for it.
  if (PMPI_Comm_get_attr(comm, g->keyval, &v, &found) != MPI_SUCCESS) return nullptr;
  CommWatch* w = found ? static_cast<CommWatch*>(v) : create_watch(comm);
  tl_last_comm = comm;
  tl_last_watch = w;
  tl_last_epoch = ep;
  return w;
}

int base_fn(int fn) { return static_cast<int>(base_of(static_cast<Fn>(fn))); }

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of the slots' t0 (DiagScope)
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

void comm_watch_init() {
  if (g) return;
  g = new Comms();
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &g->keyval, nullptr);
}

CommWatch* watch_comm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  CommWatch* w = watch_of(comm);
  return w && w->key ? w : nullptr;
}

uint64_t watch_next_seq(CommWatch* w, int fn, int64_t count, int root) {
  const uint64_t seq = w->seq.load(std::memory_order_relaxed) + 1;
  w->seq.store(seq, std::memory_order_relaxed);
  w->sig[seq % CommWatch::kSigRing].store(call_signature(base_fn(fn), count, root), std::memory_order_relaxed);
  return seq;
}

uint64_t watch_number_call(CommWatch* w, int fn, int64_t count, int root) {
  tl_numbered_comm = w;
  return tl_numbered_seq = watch_next_seq(w, fn, count, root);
}

uint64_t watch_take_number(CommWatch* w, int fn, int64_t count, int root) {
  if (tl_numbered_comm != w) return watch_next_seq(w, fn, count, root);
  tl_numbered_comm = nullptr;
  return tl_numbered_seq;
}

void watch_forget_number() { tl_numbered_comm = nullptr; }

CommWatch* comm_by_key(uint64_t key) {
  if (!g) return nullptr;
  const int n = g->n_comms.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i)
    if (g->comms[i]->key == key) return g->comms[i];
  return nullptr;
}

uint64_t watch_now_ns() { return now_ns(); }

}  // namespace hier::diag
