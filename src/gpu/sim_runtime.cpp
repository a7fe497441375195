// The simulated device's runtime (gpu/sim_runtime.hpp): streams as worker threads over the
// memory of the process's simulated device.
#include "gpu/sim_runtime.hpp"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
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
  Hooks() {
    alloc = reinterpret_cast<void* (*)(size_t)>(dlsym(RTLD_DEFAULT, "hier_sim_alloc"));
    free = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "hier_sim_free"));
    alias = reinterpret_cast<void* (*)(const void*)>(dlsym(RTLD_DEFAULT, "hier_sim_alias"));
    fail = reinterpret_cast<int (*)(const char*)>(dlsym(RTLD_DEFAULT, "hier_sim_fail"));
  }
  bool ok() const { return alloc && free && alias; }
};
const Hooks& hooks() {
  static const Hooks h;
  return h;
}

// Each queued operation waits this long first: long enough that a host read which should have
// synchronized runs before the operation, in practice always.
constexpr auto kDelay = std::chrono::microseconds(200);

}  // namespace

struct StreamImpl {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  bool busy = false, stop = false;
  std::thread worker{[this] { run(); }};

  void run() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !work.empty(); });
      if (work.empty()) return;  // stop, and nothing left
      auto w = std::move(work.front());
      work.pop_front();
      busy = true;
      lk.unlock();
      const Stamp st = stamp_begin(this);  // (the delay is part of the operation's time)
      std::this_thread::sleep_for(kDelay);
      w();
      stamp_end(this, st);
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

int enqueue(Stream s, std::function<void()> work) {
  if (!hooks().ok()) return 1;
  if (int rc = check_stream(s)) return rc;
  StreamImpl* q = resolve(s);
  {
    std::lock_guard<std::mutex> lk(q->mu);
    q->work.push_back(std::move(work));
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
  return enqueue(s, [=] { std::memcpy(alias(dst), alias(src), n); });
}
int simGetLastError() { return 0; }
int simMemsetAsync(void* p, int value, size_t n, simStream_t s) {
  if (int rc = injected("simMemsetAsync")) return rc;
  return enqueue(s, [=] { std::memset(alias(p), value, n); });
}
int simEventCreateWithFlags(simEvent_t* e, unsigned) {
  if (int rc = injected("simEventCreate")) return rc;
  *e = new EventImpl;
  return 0;
}
int simEventDestroy(simEvent_t e) {
  simEventSynchronize(e);  // its last record may still be queued: it refers to e
  delete e;
  return 0;
}
int simEventRecord(simEvent_t e, simStream_t s) {
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    n = ++e->recorded;
  }
  return enqueue(s, [e, n] {
    std::lock_guard<std::mutex> lk(e->mu);
    if (n > e->reached) e->reached = n;
    e->cv.notify_all();
  });
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
