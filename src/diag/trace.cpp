// HIER_TRACE (diag/trace.hpp): per-thread event buffers, written as Chrome trace-event JSON.
#include "diag/trace.hpp"

#include <mpi.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "diag/call_site.hpp"
#include "diag/log.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace hier::diag::trace {

bool g_on = false;
thread_local uint64_t tl_kernel_ns = 0;

namespace {

enum class Ph : uint8_t { Call, Step, Begin, End, AsyncStep };

// What a call's slice says: gathered in the thread's current call (Current), copied into its
// event (Event) when the call ends.
struct CallInfo {
  int fn = -1;
  bool handled = false;
  const void* site = nullptr;
  const char* coll = "";
  int64_t bytes = 0;
  const char* plan = "";
  const char* why = "";
  int chunks = 1, quant_bits = 0;
  double predicted_ns = 0, flat_ns = 0;
  char schedule[48] = {};
};

struct Event : CallInfo {
  uint64_t t0 = 0, t1 = 0;
  uint64_t id = 0;
  Ph ph = Ph::Call;
  StepInfo step;  // steps
};

struct Buffer {
  int tid = 0;
  std::string name;
  std::unique_ptr<Event[]> ev;
  std::atomic<size_t> n{0};
  uint64_t dropped = 0;
};

std::mutex g_mu;
std::vector<Buffer*>* g_bufs = nullptr;  // never freed: threads may still write at exit
std::atomic<uint64_t> g_ids{0};
thread_local Buffer* tl_buf = nullptr;

Buffer* make_buffer() {
  auto* b = new Buffer();
  b->tid = static_cast<int>(syscall(SYS_gettid));
  b->ev.reset(new Event[kCapacity]);
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_bufs) g_bufs = new std::vector<Buffer*>();
  g_bufs->push_back(b);
  tl_buf = b;
  return b;
}

// The next free event of this thread's buffer; null when full (counted as dropped).
Event* slot() {
  Buffer* b = tl_buf ? tl_buf : make_buffer();
  const size_t n = b->n.load(std::memory_order_relaxed);
  if (n >= kCapacity) {
    ++b->dropped;
    return nullptr;
  }
  Event* e = &b->ev[n];
  *e = Event{};
  return e;
}
// Publishes the event slot() gave (the finalize writer reads up to n).
void commit() { tl_buf->n.store(tl_buf->n.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

// The collective the thread is in.
struct Current : CallInfo {
  bool in = false;
  uint64_t t0 = 0, id = 0;
};
thread_local Current tl_call;

void copy_call(Event& e, const Current& c) { static_cast<CallInfo&>(e) = c; }

double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

const char* to_string(Transport t) {
  switch (t) {
    case Transport::Local: return "local";
    case Transport::Messages: return "messages";
    case Transport::Direct: return "messages (libhier's direct exchange)";
    case Transport::ShmCopyIn: return "node segment, copy-in";
    case Transport::ShmSingleCopy: return "node segment, single copy";
    case Transport::DeviceMessages: return "device messages (GPU-aware MPI)";
    case Transport::Staged: return "staged device copy";
    case Transport::DeviceLocal: return "device kernel";
  }
  return "?";
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void call_begin(int fn, const void* ra) noexcept {
  Current& c = tl_call;
  c = Current{};
  c.in = true;
  c.fn = fn;
  c.site = call_site(ra);  // the program's own line (diag/call_site.hpp), only when tracing
  c.id = g_ids.fetch_add(1, std::memory_order_relaxed) + 1;
  c.t0 = now_ns();
}

void call_end() noexcept {
  Current& c = tl_call;
  if (!c.in) return;
  c.in = false;
  const uint64_t t1 = now_ns();
  Event* e = slot();
  if (!e) return;
  e->ph = Ph::Call;
  e->t0 = c.t0;
  e->t1 = t1;
  e->id = c.id;
  copy_call(*e, c);
  commit();
}

void note_plan(const char* coll, int64_t bytes, const char* plan, int chunks, int quant_bits, double predicted_ns,
               double flat_ns, const char* why) noexcept {
  Current& c = tl_call;
  if (!c.in) return;
  c.coll = coll;
  c.bytes = bytes;
  c.plan = plan;
  c.chunks = chunks;
  c.quant_bits = quant_bits;
  c.predicted_ns = predicted_ns;
  c.flat_ns = flat_ns;
  c.why = why;
}

uint64_t note_run(const char* schedule) noexcept {
  Current& c = tl_call;
  if (!c.in) return g_ids.fetch_add(1, std::memory_order_relaxed) + 1;  // e.g. MPI_Start of a persistent call
  c.handled = true;
  std::snprintf(c.schedule, sizeof c.schedule, "%s", schedule);
  return c.id;
}

namespace {
void put_step(Ph ph, uint64_t id, const StepInfo& s, uint64_t t0, uint64_t t1) {
  Event* e = slot();
  if (!e) return;
  e->ph = ph;
  e->id = id;
  e->t0 = t0;
  e->t1 = t1;
  e->step = s;
  commit();
}
}  // namespace

void step(uint64_t id, const StepInfo& s, uint64_t t0, uint64_t t1) noexcept { put_step(Ph::Step, id, s, t0, t1); }
void async_step(uint64_t id, const StepInfo& s, uint64_t t0, uint64_t t1) noexcept {
  put_step(Ph::AsyncStep, id, s, t0, t1);
}

int async_begin(uint64_t id) noexcept {
  const Current& c = tl_call;
  const int fn = c.in && c.id == id ? c.fn : -1;
  Event* e = slot();
  if (!e) return fn;
  e->ph = Ph::Begin;
  e->id = id;
  e->t0 = e->t1 = now_ns();
  if (fn >= 0) copy_call(*e, c);
  commit();
  return fn;
}

void async_end(uint64_t id, int fn) noexcept {
  Event* e = slot();
  if (!e) return;
  e->ph = Ph::End;
  e->fn = fn;
  e->id = id;
  e->t0 = e->t1 = now_ns();
  commit();
}

void name_thread(const char* name) noexcept {
  if (!g_on) return;
  Buffer* b = tl_buf ? tl_buf : make_buffer();
  b->name = name;
}

void trace_init(bool on) {
  g_on = on;
  if (on) name_thread("MPI calls");
}

namespace {

// This rank's CLOCK_MONOTONIC minus rank 0's, ns, by the ping-pong of least round trip
// (Cristian's method: the error is at most half that round trip, which the file records).
void clock_offset(int rank, int size, int64_t& offset, int64_t& rtt) {
  offset = 0;
  rtt = 0;
  MPI_Comm c = MPI_COMM_NULL;
  if (size < 2 || PMPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS) return;
  constexpr int kRounds = 8;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      int64_t best = INT64_MAX, off = 0;
      for (int k = 0; k < kRounds; ++k) {
        uint64_t theirs = 0;
        const uint64_t t0 = now_ns();
        PMPI_Send(&t0, 1, MPI_UINT64_T, r, 0, c);
        PMPI_Recv(&theirs, 1, MPI_UINT64_T, r, 0, c, MPI_STATUS_IGNORE);
        const uint64_t t1 = now_ns();
        const int64_t trip = static_cast<int64_t>(t1 - t0);
        if (trip < best) {
          best = trip;
          off = static_cast<int64_t>(theirs) - static_cast<int64_t>(t0 + (t1 - t0) / 2);
        }
      }
      const int64_t res[2] = {off, best};
      PMPI_Send(res, 2, MPI_INT64_T, r, 1, c);
    }
  } else {
    for (int k = 0; k < kRounds; ++k) {
      uint64_t t = 0;
      PMPI_Recv(&t, 1, MPI_UINT64_T, 0, 0, c, MPI_STATUS_IGNORE);
      t = now_ns();
      PMPI_Send(&t, 1, MPI_UINT64_T, 0, 0, c);
    }
    int64_t res[2] = {0, 0};
    PMPI_Recv(res, 2, MPI_INT64_T, 0, 1, c, MPI_STATUS_IGNORE);
    offset = res[0];
    rtt = res[1];
  }
  PMPI_Comm_free(&c);
}

nlohmann::json step_args(const Event& e) {
  const StepInfo& s = e.step;
  nlohmann::json a = {{"call_id", e.id}, {"kind", s.kind}, {"bytes", s.bytes}, {"transport", to_string(s.via)}};
  if (*s.level) a["level"] = s.level;
  if (s.group) a["group"] = s.group;
  if (s.peer >= 0) a["peer"] = s.peer;
  if (s.wave >= 0) a["wave"] = s.wave;
  if (s.chunk >= 0) a["stage"] = s.chunk;
  if (s.kernel_ns >= 0) a["kernel_us"] = us(static_cast<uint64_t>(s.kernel_ns));
  return a;
}

std::string step_name(const StepInfo& s) { return *s.level ? std::string(s.kind) + " " + s.level : std::string(s.kind); }

}  // namespace

void trace_finalize(int rank, int size) {
  if (!g_on) return;
  int64_t offset = 0, rtt = 0;
  clock_offset(rank, size, offset, rtt);  // every rank: HIER_TRACE is agreed (config/registry.cpp)
  g_on = false;                           // no new events from here
  const std::string path = util::expand_path_template(config::get().trace, rank);
  std::string err;
  if (!util::can_create_beside(path, err)) {
    HIER_WARN("trace", "HIER_TRACE: cannot write '%s' (%s)", path.c_str(), err.c_str());
    return;
  }
  std::vector<Buffer*> bufs;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_bufs) bufs = *g_bufs;
  }
  // Call sites, resolved once per distinct address.
  std::map<const void*, std::string> sites;
  for (Buffer* b : bufs)
    for (size_t i = 0, n = b->n.load(std::memory_order_acquire); i < n; ++i)
      if (b->ev[i].ph == Ph::Call || b->ev[i].ph == Ph::Begin) sites[b->ev[i].site];
  {
    std::vector<const void*> addrs;
    for (auto& [a, s] : sites)
      if (a) addrs.push_back(a);
    const std::vector<where::Frame> frames = where::resolve(addrs);
    for (size_t i = 0; i < frames.size() && i < addrs.size(); ++i) sites[addrs[i]] = where::describe(frames[i]);
  }
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
  ev.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
  uint64_t dropped = 0;
  for (Buffer* b : bufs) {
    dropped += b->dropped;
    const std::string tname = b->name.empty() ? "thread " + std::to_string(b->tid) : b->name;
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", b->tid}, {"args", {{"name", tname}}}});
    for (size_t i = 0, n = b->n.load(std::memory_order_acquire); i < n; ++i) {
      const Event& e = b->ev[i];
      nlohmann::json j = {{"pid", rank}, {"tid", b->tid}, {"ts", us(e.t0)}};
      switch (e.ph) {
        case Ph::Call:
        case Ph::Begin: {
          const char* name = e.fn >= 0 ? fn_name(e.fn) : "MPI_Start";
          j["name"] = name;
          nlohmann::json a = {{"call", name}, {"id", e.id}};
          if (e.fn >= 0) {
            a["bytes"] = e.bytes;
            a["site"] = sites[e.site];
            a["algorithm"] = e.handled ? e.schedule : "flat (the MPI's own)";
            if (*e.plan) {
              std::string plan = e.plan;
              if (e.chunks > 1) plan += ", " + std::to_string(e.chunks) + " chunks";
              if (e.quant_bits) plan += ", int" + std::to_string(e.quant_bits);
              a["plan"] = plan;
              if (*e.why) a["why"] = e.why;
              if (e.predicted_ns > 0) a["predicted_us"] = us(static_cast<uint64_t>(e.predicted_ns));
              if (e.flat_ns > 0) a["flat_predicted_us"] = us(static_cast<uint64_t>(e.flat_ns));
            }
          }
          j["args"] = a;
          if (e.ph == Ph::Call) {
            j["ph"] = "X";
            j["cat"] = "call";
            j["dur"] = us(e.t1 - e.t0);
          } else {
            j["ph"] = "b";
            j["cat"] = "request";
            j["id"] = e.id;
          }
          break;
        }
        case Ph::End:
          j["ph"] = "e";
          j["cat"] = "request";
          j["id"] = e.id;
          j["name"] = e.fn >= 0 ? fn_name(e.fn) : "MPI_Start";
          break;
        case Ph::Step:
          j["ph"] = "X";
          j["cat"] = "step";
          j["name"] = step_name(e.step);
          j["dur"] = us(e.t1 - e.t0);
          j["args"] = step_args(e);
          break;
        case Ph::AsyncStep: {
          // a nested async slice: its begin and end under the request's id
          j["ph"] = "b";
          j["cat"] = "request";
          j["id"] = e.id;
          j["name"] = step_name(e.step);
          j["args"] = step_args(e);
          nlohmann::json end = {{"pid", rank}, {"tid", b->tid}, {"ts", us(e.t1)}, {"ph", "e"}, {"cat", "request"},
                                {"id", e.id}, {"name", step_name(e.step)}};
          ev.push_back(std::move(j));
          j = std::move(end);
          break;
        }
      }
      ev.push_back(std::move(j));
    }
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  nlohmann::json doc = {{"format", "libhier-trace/1"},
                        {"rank", rank},
                        {"size", size},
                        {"host", host},
                        {"pid", static_cast<int>(getpid())},
                        {"clock", "CLOCK_MONOTONIC, microseconds"},
                        {"clock_offset_ns", offset},
                        {"clock_offset_rtt_ns", rtt},
                        {"dropped_events", dropped},
                        {"displayTimeUnit", "ns"},
                        {"traceEvents", std::move(ev)}};
  if (dropped)
    HIER_WARN("trace", "HIER_TRACE: %llu events did not fit the buffers (%zu per thread) and were dropped",
              static_cast<unsigned long long>(dropped), kCapacity);
  if (!util::write_file_replacing(path, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", err))
    HIER_WARN("trace", "HIER_TRACE: cannot write '%s' (%s)", path.c_str(), err.c_str());
}

}  // namespace hier::diag::trace
