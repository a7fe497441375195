// Call-site timing's hot path: DiagScope (diag/sites.hpp) times each blocking collective and
// adds it to its thread's table of call sites, plain counters written by that thread alone.
// What is made of the tables at finalize: sites.cpp.
#include "diag/site_timing.hpp"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <new>

#include "diag/call_site.hpp"
#include "diag/collective_sequence.hpp"
#include "diag/sites.hpp"

namespace hier::diag {

bool g_diag_on = false;

namespace {

constexpr int kTableSlots = 256;  // call sites per thread (a power of two)
constexpr int kProbe = 16;        // slots tried before a site counts as dropped

// One writer per table (its thread): load + store, no locked instruction. Relaxed atomics so that
// the finalize reader is well defined.
struct SiteEntry {
  std::atomic<const void*> ra{nullptr};
  std::atomic<int> fn{-1};  // -1: free slot
  std::atomic<uint64_t> calls{0}, bytes{0}, total_ns{0}, min_ns{UINT64_MAX}, max_ns{0};
  std::atomic<float> win[kSiteWin] = {};  // call i's duration (ns) at win[i % kSiteWin]
};

struct SiteTable {
  SiteEntry e[kTableSlots];
  std::atomic<uint64_t> dropped{0};  // calls at sites beyond this table's capacity
  SiteTable* next = nullptr;
};

std::atomic<SiteTable*> g_tables{nullptr};  // every thread's table; pushed, never popped
thread_local SiteTable* tl_sites __attribute__((tls_model("initial-exec"))) = nullptr;

inline void bump(std::atomic<uint64_t>& a, uint64_t v) {
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

inline uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

SiteTable* new_table() noexcept {
  auto* t = new (std::nothrow) SiteTable();
  if (!t) return nullptr;
  t->next = g_tables.load(std::memory_order_relaxed);
  while (!g_tables.compare_exchange_weak(t->next, t, std::memory_order_release, std::memory_order_relaxed)) {
  }
  tl_sites = t;
  return t;
}

void record_site(int fn, const void* ra, uint64_t bytes, uint64_t dt) noexcept {
  SiteTable* t = tl_sites;
  if (!t && !(t = new_table())) return;
  const uint64_t h = mix64(reinterpret_cast<uintptr_t>(ra) ^ (static_cast<uint64_t>(fn) << 52));
  for (int p = 0; p < kProbe; ++p) {
    SiteEntry& e = t->e[(h + static_cast<uint64_t>(p)) & (kTableSlots - 1)];
    const int f = e.fn.load(std::memory_order_relaxed);
    if (f == -1) {
      e.ra.store(ra, std::memory_order_relaxed);
      e.fn.store(fn, std::memory_order_release);
    } else if (f != fn || e.ra.load(std::memory_order_relaxed) != ra) {
      continue;
    }
    const uint64_t c = e.calls.load(std::memory_order_relaxed);
    e.win[c % kSiteWin].store(static_cast<float>(dt), std::memory_order_relaxed);
    e.calls.store(c + 1, std::memory_order_relaxed);
    if (bytes) bump(e.bytes, bytes);
    bump(e.total_ns, dt);
    if (dt < e.min_ns.load(std::memory_order_relaxed)) e.min_ns.store(dt, std::memory_order_relaxed);
    if (dt > e.max_ns.load(std::memory_order_relaxed)) e.max_ns.store(dt, std::memory_order_relaxed);
    return;
  }
  bump(t->dropped, 1);
}

}  // namespace

void DiagScope::begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) noexcept {
  on_ = true;
  fn_ = fn;
  root_ = root;
  comm_ = comm;
  ra_ = ra = call_site(ra);  // the program's line: a C program's return address, or found past its bindings
  t0_ = mono_ns();
  if (g_watch_on) {
    try {
      slot_ = this_thread_slot();
      if (slot_) watch_begin(slot_, fn, comm, count, root, ra, t0_);
    } catch (...) {  // no memory for the communicator's state: this call is not watched
      slot_ = nullptr;
    }
  }
}

void DiagScope::end() noexcept {
  const uint64_t dt = mono_ns() - t0_;
  if (slot_) watch_end(slot_);
  record_site(fn_, ra_, bytes_, dt);
  if (comm_ == MPI_COMM_WORLD) sequence_record(fn_, root_, bytes_);
}

std::vector<TimedSite> timed_sites(uint64_t& dropped) {
  std::vector<TimedSite> out;
  dropped = 0;
  for (SiteTable* t = g_tables.load(std::memory_order_acquire); t; t = t->next) {
    dropped += t->dropped.load(std::memory_order_relaxed);
    for (SiteEntry& e : t->e) {
      const int fn = e.fn.load(std::memory_order_acquire);
      const uint64_t c = e.calls.load(std::memory_order_relaxed);
      if (fn < 0 || c == 0) continue;
      TimedSite r{e.ra.load(std::memory_order_relaxed), fn, c, e.bytes.load(std::memory_order_relaxed),
                  e.total_ns.load(std::memory_order_relaxed), e.min_ns.load(std::memory_order_relaxed),
                  e.max_ns.load(std::memory_order_relaxed), {}};
      const uint64_t n = std::min<uint64_t>(c, kSiteWin);
      for (uint64_t k = c - n; k < c; ++k) r.win.push_back(e.win[k % kSiteWin].load(std::memory_order_relaxed));
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace hier::diag
