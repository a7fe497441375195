// The simulated device's runtime (gpu/sim_runtime.hpp): streams as worker threads over the
// memory of the process's simulated device, kernels on a pool of block runners whose lanes are
// threads.
#include "gpu/sim_runtime.hpp"

#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace hier::gpu::sim {

thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

namespace {

// The simulated device's hooks, found in the process (the test's fake runtime exports them).
struct Hooks {
  void* (*alloc)(size_t) = nullptr;
  void (*free)(void*) = nullptr;
  void* (*alias)(const void*) = nullptr;
  int (*fail)(const char*) = nullptr;  // fault injection (optional): the error a call answers, or 0
  void (*span)(const void*, const char*, uint64_t, uint64_t, uint64_t) = nullptr;  // (optional) each operation's run
  int (*fiber_lanes)() = nullptr;  // (optional) non-zero: a launch runs its lanes as fibers (below)
  Hooks() {
    alloc = reinterpret_cast<void* (*)(size_t)>(dlsym(RTLD_DEFAULT, "hier_sim_alloc"));
    free = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "hier_sim_free"));
    alias = reinterpret_cast<void* (*)(const void*)>(dlsym(RTLD_DEFAULT, "hier_sim_alias"));
    fail = reinterpret_cast<int (*)(const char*)>(dlsym(RTLD_DEFAULT, "hier_sim_fail"));
    span = reinterpret_cast<void (*)(const void*, const char*, uint64_t, uint64_t, uint64_t)>(
        dlsym(RTLD_DEFAULT, "hier_sim_span"));
    fiber_lanes = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "hier_sim_fiber_lanes"));
  }
  bool ok() const { return alloc && free && alias; }
};
const Hooks& hooks() {
  static const Hooks h;
  return h;
}

// An operation queued on an idle stream waits this long first: long enough that a host read which
// should have synchronized runs before the operation, in practice always.
constexpr auto kDelay = std::chrono::microseconds(200);

uint64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "hier sim device: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

// ---- kernels: block runners whose lanes are threads -------------------------------------------

// A barrier of n threads, reused round after round (n set while no thread waits in it). Every
// arrival is a read-modify-write of `arrived` (acquire-release: a release sequence up to the
// last arrival), the last one publishes the round with a release increment of `round`, and the
// others leave on an acquire load of it: whatever any thread wrote before the barrier, every
// thread reads after it (ThreadSanitizer sees the same order). The waiters spin a little with
// yields (a lane is often a few instructions behind), then sleep on a futex. Each arrival says
// which barrier its thread reached (kinds): threads that meet at different barriers are a
// kernel's bug, which stops the process with `what`.
void fiber_yield();
bool in_fiber();
void fiber_progress();

struct Barrier {
  std::atomic<uint32_t> round{0};
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> kinds{0};
  std::atomic<uint32_t> sleepers{0};
  uint32_t n = 1;

  // guard: a wait longer than this many seconds stops the process (0: wait for ever); with
  // `leave`, the thread arrives and goes on without waiting for the others.
  void wait(uint32_t kind, int guard, const char* what, bool leave = false) {
    const uint32_t r = round.load(std::memory_order_acquire);
    kinds.fetch_or(kind, std::memory_order_relaxed);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      const uint32_t k = kinds.exchange(0, std::memory_order_relaxed);
      if (k & (k - 1)) die(what);
      arrived.store(0, std::memory_order_relaxed);
      round.fetch_add(1, std::memory_order_seq_cst);
      if (in_fiber()) fiber_progress();
      if (sleepers.load(std::memory_order_seq_cst))
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&round), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
      return;
    }
    if (leave) return;
    if (in_fiber()) {  // the block's other lanes run on this thread: let them reach the barrier
      while (round.load(std::memory_order_acquire) == r) fiber_yield();
      return;
    }
    for (int i = 0; i < 4; ++i) {
      if (round.load(std::memory_order_acquire) != r) return;
      std::this_thread::yield();
    }
    const uint64_t start = now_ns();
    while (round.load(std::memory_order_acquire) == r) {
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      timespec t{1, 0};
      if (round.load(std::memory_order_seq_cst) == r)
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&round), FUTEX_WAIT_PRIVATE, r, guard ? &t : nullptr, nullptr, 0);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (guard && round.load(std::memory_order_acquire) == r && now_ns() - start > uint64_t(guard) * 1000000000ull) {
        std::fprintf(stderr, "hier sim device: a lane waited %d s at a barrier: ", guard);
        die("a lane of its block or warp never reached it (a barrier or shuffle skipped by some lanes, or a lane that never ends)");
      }
    }
  }
};

// What a lane thread arrives with at a barrier.
constexpr uint32_t kSync = 1, kEnd = 2;
// How long a lane waits for the others of its block or warp before giving up.
constexpr int kGuardSeconds = 120;
const char* const kWarpMismatch =
    "lanes of a warp met at different places: a shuffle, ballot or syncwarp that some lanes skipped, others ended the "
    "kernel";
const char* const kBlockMismatch =
    "lanes of a block met at different places: a syncthreads that some lanes skipped, others ended the kernel";

struct Grid {
  const std::function<void()>* body;
  unsigned g, b;
  std::mutex mu;
  std::condition_variable cv;
  unsigned left;  // blocks not yet ended
};

struct Runner;
struct Lane {
  Runner* runner = nullptr;
  unsigned t = 0;
};
thread_local Lane t_lane;

constexpr unsigned kWarps = kMaxBlock / kWarp;
static_assert(kWarp && (kWarp & (kWarp - 1)) == 0 && kWarp <= 32, "kWarp: a power of two, at most 32 (ballot's bits)");
static_assert(kMaxBlock % kWarp == 0, "a block is whole warps");

// One block at a time on kMaxBlock lane threads: lane 0 takes a block from the device's queue,
// the lanes meet at `start`, the block's lanes run the kernel, all meet at `end`.
struct Runner {
  Barrier start, end;          // every lane thread of the runner
  Barrier block;               // syncthreads: the block's lanes
  Barrier warp[kWarps];        // shuffles, ballots, syncwarp: the warp's lanes
  uint64_t slot[kMaxBlock]{};  // each lane's value in an exchange
  alignas(16) unsigned char shared[kSharedBytes];
  Grid* grid = nullptr;  // the current block: set by lane 0 before `start`
  unsigned index = 0;
  unsigned active[kWarps]{};  // lanes of each warp in the current block

  // The barriers sized for a block of b lanes (both modes: block runners and fibers).
  void size_for(unsigned b) {
    block.n = b;
    for (unsigned w = 0; w < kWarps; ++w) {
      const unsigned lo = w * kWarp;
      active[w] = b <= lo ? 0 : b - lo < kWarp ? b - lo : kWarp;
      warp[w].n = active[w] ? active[w] : 1;
    }
  }
};

class Device {
 public:
  void run(const std::function<void()>& body, unsigned g, unsigned b) {
    start_once();
    Grid grid{&body, g, b, {}, {}, g};
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (unsigned i = 0; i < g; ++i) queue_.push_back({&grid, i});
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lk(grid.mu);
    grid.cv.wait(lk, [&] { return grid.left == 0; });
  }

 private:
  struct Item {
    Grid* grid;
    unsigned index;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::once_flag once_;
  Runner* runners_ = nullptr;

  // The runners and their lanes, on the first launch; never joined (the device outlives every
  // static that may still launch at exit), lanes idle on a futex between kernels.
  void start_once() {
    std::call_once(once_, [this] {
      runners_ = new Runner[kRunners];
      for (unsigned r = 0; r < kRunners; ++r) {
        runners_[r].start.n = runners_[r].end.n = kMaxBlock;
        for (unsigned t = 0; t < kMaxBlock; ++t) std::thread([this, r, t] { lane(&runners_[r], t); }).detach();
      }
    });
  }

  void lane(Runner* rn, unsigned t) {
    t_lane = {rn, t};
    for (;;) {
      if (t == 0) take(rn);
      rn->start.wait(kSync, 0, "runner start");
      Grid& gr = *rn->grid;
      if (t < gr.b) {
        gridDim = {gr.g, 1, 1};
        blockDim = {gr.b, 1, 1};
        blockIdx = {rn->index, 0, 0};
        threadIdx = {t, 0, 0};
        (*gr.body)();
        // The kernel's end is an arrival of its own kind at the warp's barrier and at the
        // block's: a lane still in a shuffle or a syncthreads while another has ended is the
        // kernel's bug, which stops the process instead of hanging it.
        rn->warp[t / kWarp].wait(kEnd, kGuardSeconds, kWarpMismatch, true);
        rn->block.wait(kEnd, kGuardSeconds, kBlockMismatch);
      }
      rn->end.wait(kSync, 0, "runner end");
      if (t == 0) {
        std::lock_guard<std::mutex> lk(gr.mu);
        if (--gr.left == 0) gr.cv.notify_all();
      }
    }
  }

  // Lane 0: the next block of any grid, and the barriers sized for it.
  void take(Runner* rn) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !queue_.empty(); });
    const Item it = queue_.front();
    queue_.pop_front();
    lk.unlock();
    rn->grid = it.grid;
    rn->index = it.index;
    rn->size_for(it.grid->b);
  }
};

Device& device() {
  static Device* d = new Device;  // never destroyed: lanes may still wait in it at exit
  return *d;
}

// ---- lanes as fibers: the fast mode ---------------------------------------------------------
// With the process's optional hook hier_sim_fiber_lanes() answering non-zero at a launch, the
// launch's blocks run one after another on the stream's own thread, each block's lanes as fibers
// (ucontext) taking turns: a lane runs until a barrier that the rest of its block or warp has not
// reached yet, then the next lane runs. The barriers, shuffles, ballots, shared memory and the
// checks of where lanes meet are the threaded mode's (the same Runner); what is lost is lanes
// and blocks truly at the same time, so a missing barrier goes unseen unless the order of turns
// shows it, and ThreadSanitizer sees one thread. What is gained is time: a barrier costs a
// context switch in the process rather than the OS scheduler's wake-ups, which on a loaded
// machine (tests of 8 ranks on 2 cores) is the difference between microseconds and milliseconds.
// The tests that look for races (unit.sim_device_test) run lanes as threads; the MPI-level device
// tests choose with FAKE_GPU_LANES (tests/device/fake_gpu.cpp). Sanitizer builds always run
// threads: neither sanitizer follows swapcontext's stack switches without annotations.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kFibersAllowed = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kFibersAllowed = false;
#else
constexpr bool kFibersAllowed = true;
#endif
#else
constexpr bool kFibersAllowed = true;
#endif

constexpr size_t kFiberStack = 512 * 1024, kGuardPage = 4096;

struct Fibers {
  Runner rn;  // the block's barriers, exchange slots and shared memory
  ucontext_t sched;
  ucontext_t ctx[kMaxBlock];
  bool done[kMaxBlock]{};
  const std::function<void()>* body = nullptr;
  uint64_t progress = 0;  // barriers passed and lanes ended: a turn of every lane without any is a deadlock
  unsigned char* stacks = nullptr;  // kMaxBlock stacks, each above a guard page
  size_t map_bytes = (kFiberStack + kGuardPage) * kMaxBlock;

  Fibers() {
    void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) die("no memory for the lanes' stacks");
    stacks = static_cast<unsigned char*>(m);
    for (unsigned t = 0; t < kMaxBlock; ++t) mprotect(stacks + t * (kFiberStack + kGuardPage), kGuardPage, PROT_NONE);
  }
  ~Fibers() { munmap(stacks, map_bytes); }
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;
};
thread_local Fibers* t_fibers = nullptr;  // set while this thread runs a block's lanes as fibers

bool in_fiber() { return t_fibers != nullptr; }
void fiber_progress() { ++t_fibers->progress; }
void fiber_yield() {
  if (swapcontext(&t_fibers->ctx[t_lane.t], &t_fibers->sched) != 0) die("swapcontext failed");
}

void fiber_lane() {
  Fibers& f = *t_fibers;
  const unsigned t = t_lane.t;
  (*f.body)();
  // The kernel's end, as in the threaded mode: met by the warp (without waiting) and the block.
  f.rn.warp[t / kWarp].wait(kEnd, kGuardSeconds, kWarpMismatch, true);
  f.rn.block.wait(kEnd, kGuardSeconds, kBlockMismatch);
  f.done[t] = true;
  ++f.progress;
}  // returns to the scheduler (uc_link)

void run_fibers(const std::function<void()>& body, unsigned g, unsigned b) {
  static thread_local std::unique_ptr<Fibers> mine;  // per stream thread, freed when it ends
  if (!mine) mine = std::make_unique<Fibers>();
  Fibers& f = *mine;
  Runner& rn = f.rn;
  f.body = &body;
  rn.size_for(b);
  gridDim = {g, 1, 1};
  blockDim = {b, 1, 1};
  for (unsigned i = 0; i < g; ++i) {
    blockIdx = {i, 0, 0};
    for (unsigned t = 0; t < b; ++t) {
      ucontext_t& c = f.ctx[t];
      if (getcontext(&c) != 0) die("getcontext failed");
      c.uc_stack.ss_sp = f.stacks + t * (kFiberStack + kGuardPage) + kGuardPage;
      c.uc_stack.ss_size = kFiberStack;
      c.uc_link = &f.sched;
      makecontext(&c, fiber_lane, 0);
      f.done[t] = false;
    }
    t_fibers = &f;
    for (unsigned left = b; left;) {
      const uint64_t before = f.progress;
      for (unsigned t = 0; t < b; ++t) {
        if (f.done[t]) continue;
        t_lane = {&rn, t};
        threadIdx = {t, 0, 0};
        if (swapcontext(&f.sched, &f.ctx[t]) != 0) die("swapcontext failed");
        if (f.done[t]) --left;
      }
      if (left && f.progress == before)
        die("every lane of a block waits at a barrier that the others never reach (a syncthreads, shuffle or ballot "
            "skipped by some lanes of the block or warp)");
    }
    t_fibers = nullptr;
    t_lane = {};
  }
}

Runner& current(const char* call) {
  if (!t_lane.runner) {
    std::fprintf(stderr, "hier sim device: %s called outside a kernel\n", call);
    std::abort();
  }
  return *t_lane.runner;
}

}  // namespace

bool fiber_lanes() { return kFibersAllowed && hooks().fiber_lanes && hooks().fiber_lanes() != 0; }

void run_grid(const std::function<void()>& body, unsigned g, unsigned b) {
  if (fiber_lanes()) run_fibers(body, g, b);
  else device().run(body, g, b);
}

void syncthreads() {
  Runner& rn = current("syncthreads");
  rn.block.wait(kSync, kGuardSeconds, kBlockMismatch);
}

void syncwarp() { current("syncwarp").warp[t_lane.t / kWarp].wait(kSync, kGuardSeconds, kWarpMismatch); }

unsigned lane_id() { return threadIdx.x % kWarp; }

uint64_t exchange(uint64_t v, unsigned src) {
  Runner& rn = current("shfl");
  const unsigned w = t_lane.t / kWarp, base = w * kWarp;
  Barrier& bar = rn.warp[w];
  rn.slot[t_lane.t] = v;
  bar.wait(kSync, kGuardSeconds, kWarpMismatch);
  const uint64_t r = src < rn.active[w] ? rn.slot[base + src] : v;
  bar.wait(kSync, kGuardSeconds, kWarpMismatch);  // the slots are free again
  return r;
}

unsigned ballot(bool p) {
  Runner& rn = current("ballot");
  const unsigned w = t_lane.t / kWarp, base = w * kWarp;
  Barrier& bar = rn.warp[w];
  rn.slot[t_lane.t] = p ? 1 : 0;
  bar.wait(kSync, kGuardSeconds, kWarpMismatch);
  unsigned bits = 0;
  for (unsigned i = 0; i < rn.active[w]; ++i) bits |= static_cast<unsigned>(rn.slot[base + i]) << i;
  bar.wait(kSync, kGuardSeconds, kWarpMismatch);
  return bits;
}

void* shared_memory() { return current("shared_memory").shared; }

// A stream's queued operation (named outside the anonymous namespace: StreamImpl holds them).
struct Op {
  std::function<void()> work;
  const char* what;
  uint64_t queued_ns;  // when the host queued it (the span hook's, else 0)
};

struct StreamImpl {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Op> work;
  bool busy = false, stop = false;
  std::thread worker{[this] { run(); }};

  void run() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      // An operation that finds the stream idle waits kDelay first; one queued behind another runs
      // when that one ends: the first one's delay already keeps every later one after a host read
      // that skipped the synchronize, and a batch of many small operations (10,000 pack
      // programs, say) does not pay it once each.
      const bool idle = work.empty();
      cv.wait(lk, [&] { return stop || !work.empty(); });
      if (work.empty()) return;  // stop, and nothing left
      auto w = std::move(work.front());
      work.pop_front();
      busy = true;
      lk.unlock();
      if (idle) std::this_thread::sleep_for(kDelay);
      const uint64_t t0 = hooks().span ? now_ns() : 0;
      op_begins(this);
      w.work();
      if (hooks().span) hooks().span(this, w.what, w.queued_ns, t0, now_ns());
      lk.lock();
      busy = false;
      cv.notify_all();
    }
  }
  void drain() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return work.empty() && !busy; });
  }
  ~StreamImpl() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
};

// An event: records are numbered; one is reached when its stream ran everything queued before
// it (the stream runs its work in order, so `reached` only grows).
struct EventImpl {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, reached = 0;
};

namespace {
// The default stream (a null Stream), as a runtime has one: created on first use, never joined
// (it must outlive every static that might still queue work at exit).
StreamImpl* default_stream() {
  static StreamImpl* s = new StreamImpl;
  return s;
}
StreamImpl* resolve(Stream s) { return s ? s : default_stream(); }
}  // namespace

int enqueue(Stream s, std::function<void()> work, const char* what) {
  if (!hooks().ok()) return 1;
  if (int rc = check_stream(s)) return rc;
  StreamImpl* q = resolve(s);
  {
    std::lock_guard<std::mutex> lk(q->mu);
    q->work.push_back({std::move(work), what, hooks().span ? now_ns() : 0});
  }
  q->cv.notify_all();
  return 0;
}

void* alias(const void* p) { return hooks().alias(p); }
int injected(const char* call) { return hooks().fail ? hooks().fail(call) : 0; }
bool usable() { return hooks().ok(); }

}  // namespace hier::gpu::sim

using namespace hier::gpu::sim;

int simMalloc(void** p, size_t n) {
  if (!hooks().ok()) return 2;  // cudaErrorMemoryAllocation's meaning: nothing allocated
  if (int rc = injected("simMalloc")) return rc;
  *p = hooks().alloc(n);
  return *p ? 0 : 2;
}
int simFree(void* p) {
  if (p) hooks().free(p);
  return 0;
}
int simMallocHost(void** p, size_t n) {
  if (int rc = injected("simMallocHost")) return rc;
  *p = std::aligned_alloc(64, (n + 63) / 64 * 64);
  return *p ? 0 : 2;
}
int simFreeHost(void* p) {
  std::free(p);
  return 0;
}
int simStreamCreateWithFlags(simStream_t* s, unsigned) {
  if (int rc = injected("simStreamCreate")) return rc;
  *s = new StreamImpl;
  note_stream(*s, true);
  return 0;
}
int simStreamDestroy(simStream_t s) {
  if (s) s->drain();
  if (s) note_stream(s, false);
  delete s;
  return 0;
}
int simStreamSynchronize(simStream_t s) {
  resolve(s)->drain();
  return injected("simStreamSynchronize");
}
int simMemcpyAsync(void* dst, const void* src, size_t n, int, simStream_t s) {
  if (int rc = injected("simMemcpyAsync")) return rc;
  return enqueue(s, [=] { std::memcpy(alias(dst), alias(src), n); }, "copy");
}
int simGetLastError() { return 0; }
int simMemsetAsync(void* p, int value, size_t n, simStream_t s) {
  if (int rc = injected("simMemsetAsync")) return rc;
  return enqueue(s, [=] { std::memset(alias(p), value, n); }, "fill");
}
int simEventCreateWithFlags(simEvent_t* e, unsigned) {
  if (int rc = injected("simEventCreate")) return rc;
  *e = new EventImpl;
  return 0;
}
int simEventDestroy(simEvent_t e) {
  simEventSynchronize(e);  // its last record may still be queued: it refers to e
  event_unwaited(e);       // and another stream's wait for it (simStreamWaitEvent)
  delete e;
  return 0;
}
int simEventRecord(simEvent_t e, simStream_t s) {
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    n = ++e->recorded;
  }
  return enqueue(
      s,
      [e, n] {
        std::lock_guard<std::mutex> lk(e->mu);
        if (n > e->reached) e->reached = n;
        e->cv.notify_all();
      },
      "event");
}
uint64_t hier::gpu::sim::event_recorded(Event e) {
  std::lock_guard<std::mutex> lk(e->mu);
  return e->recorded;
}
void hier::gpu::sim::event_wait_for(Event e, uint64_t n) {
  std::unique_lock<std::mutex> lk(e->mu);
  e->cv.wait(lk, [&] { return e->reached >= n; });
}
int simEventSynchronize(simEvent_t e) {
  std::unique_lock<std::mutex> lk(e->mu);
  const uint64_t want = e->recorded;
  e->cv.wait(lk, [&] { return e->reached >= want; });
  lk.unlock();
  return injected("simEventSynchronize");  // an error that surfaced while the work ran
}
