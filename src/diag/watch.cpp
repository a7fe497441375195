// Hang watchdog: per-communicator sequence numbers (application threads), the side channel and
// the watchdog thread (socket I/O and /proc reads only, never MPI), and the hang report.
#include "diag/watch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "diag/log.hpp"
#include "diag/ranks_text.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"
#include "util/strings.hpp"

namespace hier::diag {

bool g_watch_on = false;

struct CommWatch {
  uint64_t key = 0;  // 0: not watched (intercommunicator)
  int size = 0;
  std::vector<int> world;  // world rank of each member
  std::atomic<uint64_t> seq{0};
  // Signatures of the last collectives, by sequence number modulo kSigRing (mismatch checks).
  static constexpr int kSigRing = 16;
  std::atomic<uint64_t> sig[kSigRing] = {};
  std::atomic<bool> freed{false};
};

namespace {

constexpr int kMaxSlots = 64;
constexpr int kMaxComms = 4096;

struct State {
  double limit_s = 0;
  int rank = -1, size = 0;
  int main_tid = 0;
  std::string report_dir;  // "" = no file
  int keyval = MPI_KEYVAL_INVALID;
  std::mutex mu;  // creation of CommWatch and slots
  CommWatch* comms[kMaxComms] = {};
  std::atomic<int> n_comms{0};
  std::map<uint64_t, int> ordinal;  // members hash -> how many communicators seen with it
  CallSlot slots[kMaxSlots];
  std::atomic<int> n_slots{0};
  std::atomic<uint64_t> epoch{1};  // bumped when a watched communicator is freed
  // side channel
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  struct Peer {
    uint32_t ip[4];
    uint16_t port;
    int32_t pid;
    char host[64];
  };
  std::vector<Peer> peers;
  pthread_t thread{};
  bool thread_started = false;
  std::atomic<bool> investigating{false};
  std::mutex hangs_mu;
  std::vector<std::string> hangs;  // JSON texts of the reports this rank wrote
};

State* g = nullptr;  // never freed: the watchdog thread may outlive finalize at exit

thread_local CallSlot* tl_slot __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local MPI_Comm tl_last_comm __attribute__((tls_model("initial-exec"))) = MPI_COMM_NULL;
thread_local CommWatch* tl_last_watch __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local uint64_t tl_last_epoch __attribute__((tls_model("initial-exec"))) = 0;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of the slots' t0 (DiagScope)
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

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
    const uint64_t h = fnv(w->world.data(), w->world.size() * sizeof(int));
    std::lock_guard<std::mutex> lk(g->mu);
    const int ord = g->ordinal[h]++;
    w->key = fnv(&ord, sizeof ord, h) | 1;
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
  PMPI_Comm_get_attr(comm, g->keyval, &v, &found);
  CommWatch* w = found ? static_cast<CommWatch*>(v) : create_watch(comm);
  tl_last_comm = comm;
  tl_last_watch = w;
  tl_last_epoch = ep;
  return w;
}

int base_fn(int fn) { return static_cast<int>(base_of(static_cast<Fn>(fn))); }

uint64_t signature(int fn, int64_t count, int root) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(fn)) << 48) ^
         (static_cast<uint64_t>(static_cast<uint16_t>(root + 1)) << 32) ^ static_cast<uint64_t>(count & 0xffffffff);
}

}  // namespace

CallSlot* this_thread_slot() {
  if (tl_slot) return tl_slot;
  std::lock_guard<std::mutex> lk(g->mu);
  const int n = g->n_slots.load();
  if (n >= kMaxSlots) return nullptr;
  tl_slot = &g->slots[n];
  g->n_slots.store(n + 1, std::memory_order_release);
  return tl_slot;
}

void watch_begin(CallSlot* s, int fn, MPI_Comm comm, int64_t count, int root, const void* ra, uint64_t t0_ns) {
  if (comm == MPI_COMM_NULL) return;
  CommWatch* w = watch_of(comm);
  if (!w || !w->key) return;
  const uint64_t seq = w->seq.load(std::memory_order_relaxed) + 1;
  w->seq.store(seq, std::memory_order_relaxed);
  w->sig[seq % CommWatch::kSigRing].store(signature(base_fn(fn), count, root), std::memory_order_relaxed);
  const uint64_t g0 = s->gen.load(std::memory_order_relaxed);
  s->gen.store(g0 + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->comm = w;
  s->seq = seq;
  s->fn = fn;
  s->root = root;
  s->count = count;
  s->ra = ra;
  s->t0_ns = t0_ns;
  s->gen.store(g0 + 2, std::memory_order_release);
  s->active.store(1, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// The watchdog thread.
namespace {

struct CallView {
  bool active = false;
  uint64_t gen = 0;
  CommWatch* comm = nullptr;
  uint64_t seq = 0;
  int fn = 0, root = -1;
  int64_t count = -1;
  const void* ra = nullptr;
  uint64_t t0 = 0;
};

CallView read_slot(CallSlot& s) {
  CallView v;
  for (int tries = 0; tries < 100; ++tries) {
    const uint64_t a = s.gen.load(std::memory_order_acquire);
    if (a & 1) continue;
    v.active = s.active.load(std::memory_order_acquire) != 0;
    v.comm = s.comm;
    v.seq = s.seq;
    v.fn = s.fn;
    v.root = s.root;
    v.count = s.count;
    v.ra = s.ra;
    v.t0 = s.t0_ns;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.gen.load(std::memory_order_relaxed) == a) {
      v.gen = a;
      return v;
    }
  }
  v.active = false;
  return v;
}

CommWatch* comm_by_key(uint64_t key) {
  const int n = g->n_comms.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i)
    if (g->comms[i]->key == key) return g->comms[i];
  return nullptr;
}

std::string clean(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

const char* fn_name(int fn) { return fn >= 0 && fn < static_cast<int>(Fn::Count) ? kFnNames[fn] : "?"; }

// This rank's answer to "where are you with communicator `key`?": tab-separated fields.
//  rank host pid known seq_on_comm sig_at_asked_seq in_call fn call_key call_seq count root elapsed_ms site doing
std::string status_line(uint64_t key, uint64_t asked_seq) {
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  CommWatch* w = comm_by_key(key);
  std::ostringstream o;
  o << g->rank << '\t' << clean(host) << '\t' << getpid() << '\t' << (w ? 1 : 0) << '\t'
    << (w ? w->seq.load() : 0) << '\t'
    << (w && asked_seq ? w->sig[asked_seq % CommWatch::kSigRing].load() : 0) << '\t';
  // The call in progress (the main thread's, else any thread's).
  CallView cv;
  const int ns = g->n_slots.load(std::memory_order_acquire);
  for (int i = 0; i < ns && !cv.active; ++i) cv = read_slot(g->slots[i]);
  if (cv.active) {
    const std::vector<where::Frame> f = where::resolve({cv.ra});
    o << 1 << '\t' << fn_name(cv.fn) << '\t' << (cv.comm ? cv.comm->key : 0) << '\t' << cv.seq << '\t' << cv.count
      << '\t' << cv.root << '\t' << (now_ns() - cv.t0) / 1000000 << '\t' << clean(where::describe(f[0])) << '\t' << "";
  } else {
    // Not in a collective: what the main thread is doing, and where in the program.
    // A blocked thread can be caught in a short run (a signal, a restarted sleep): look again.
    where::ThreadLook t = where::look_at_thread(g->main_tid);
    for (int i = 0; i < 10 && t.stack.empty(); ++i) {
      usleep(20 * 1000);
      t = where::look_at_thread(g->main_tid);
    }
    const std::vector<where::Frame> fr = where::resolve(t.stack);
    std::string mpi_call, site;
    for (const where::Frame& f : fr) {
      if (mpi_call.empty() && (f.function.rfind("MPI_", 0) == 0 || f.function.rfind("PMPI_", 0) == 0))
        mpi_call = f.function;
      if (site.empty() && !f.system && !f.file_line.empty()) site = where::describe(f);
    }
    if (site.empty())
      for (const where::Frame& f : fr)
        if (!f.system) {
          site = where::describe(f);
          break;
        }
    std::string doing = mpi_call.empty() ? "not in MPI" : "in " + mpi_call + " (not a collective)";
    doing += ", main thread " + t.state;
    if (!t.syscall.empty()) doing += " in " + t.syscall + "()";
    if (!site.empty()) doing += " at " + site;
    o << 0 << '\t' << "" << '\t' << 0 << '\t' << 0 << '\t' << -1 << '\t' << -1 << '\t' << 0 << '\t'
      << (site.empty() ? "" : clean(site)) << '\t' << clean(doing);
  }
  return o.str();
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads one line ending in '\n' within `ms` milliseconds. 0: ok, 1: timeout, 2: closed/error.
int read_line(int fd, std::string& line, int ms) {
  line.clear();
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(ms) * 1000000ull;
  char c[512];
  for (;;) {
    const uint64_t t = now_ns();
    if (t >= deadline) return 1;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>((deadline - t) / 1000000ull) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 1;
    const ssize_t n = recv(fd, c, sizeof c, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 2;
    line.append(c, static_cast<size_t>(n));
    const size_t nl = line.find('\n');
    if (nl != std::string::npos) {
      line.resize(nl);
      return 0;
    }
  }
}

void serve_one(int lfd) {
  const int fd = accept(lfd, nullptr, nullptr);
  if (fd < 0) return;
  std::string req;
  if (read_line(fd, req, 2000) == 0) {
    unsigned long long key = 0, seq = 0;
    if (std::sscanf(req.c_str(), "Q %llx %llu", &key, &seq) == 2) write_all(fd, status_line(key, seq) + "\n");
  }
  close(fd);
}

// Connects to a peer's side channel. 0: connected (fd set), 1: refused (process gone),
// 2: no answer (timeout / unreachable).
int connect_peer(const State::Peer& p, int& fd_out, int ms) {
  int result = 2;
  for (int a = 0; a < 4 && p.ip[a]; ++a) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return 2;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(p.port);
    sa.sin_addr.s_addr = p.ip[a];
    int r = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (r < 0 && errno == EINPROGRESS) {
      pollfd pf{fd, POLLOUT, 0};
      r = poll(&pf, 1, ms);
      if (r == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == 0) r = 0;
        else {
          if (err == ECONNREFUSED) result = 1;
          r = -1;
        }
      } else {
        r = -1;
      }
    } else if (r < 0 && errno == ECONNREFUSED) {
      result = 1;
    }
    if (r == 0) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      fd_out = fd;
      return 0;
    }
    close(fd);
  }
  return result;
}

struct MemberStatus {
  int world = -1;
  enum { Ok, Gone, NoAnswer, Unreachable } reach = Ok;
  std::string host;
  long pid = 0;
  bool known = false;
  uint64_t seq_on_comm = 0;
  uint64_t sig_at_seq = 0;
  bool in_call = false;
  std::string fn;
  uint64_t call_key = 0, call_seq = 0;
  long long count = -1;
  int root = -1;
  long elapsed_ms = 0;
  std::string site, doing;
};

bool parse_status(const std::string& line, MemberStatus& m) {
  std::vector<std::string> f;
  size_t s = 0;
  for (;;) {
    const size_t t = line.find('\t', s);
    f.push_back(line.substr(s, t == std::string::npos ? std::string::npos : t - s));
    if (t == std::string::npos) break;
    s = t + 1;
  }
  if (f.size() != 15) return false;
  m.host = f[1];
  m.pid = std::atol(f[2].c_str());
  m.known = f[3] == "1";
  m.seq_on_comm = std::strtoull(f[4].c_str(), nullptr, 10);
  m.sig_at_seq = std::strtoull(f[5].c_str(), nullptr, 10);
  m.in_call = f[6] == "1";
  m.fn = f[7];
  m.call_key = std::strtoull(f[8].c_str(), nullptr, 10);
  m.call_seq = std::strtoull(f[9].c_str(), nullptr, 10);
  m.count = std::atoll(f[10].c_str());
  m.root = std::atoi(f[11].c_str());
  m.elapsed_ms = std::atol(f[12].c_str());
  m.site = f[13];
  m.doing = f[14];
  return true;
}

MemberStatus query(int world, uint64_t key, uint64_t seq) {
  MemberStatus m;
  m.world = world;
  if (world == g->rank) {
    parse_status(status_line(key, seq), m);
    return m;
  }
  if (world < 0 || world >= static_cast<int>(g->peers.size())) {
    m.reach = MemberStatus::Unreachable;
    return m;
  }
  const State::Peer& p = g->peers[static_cast<size_t>(world)];
  m.host = p.host;
  m.pid = p.pid;
  int fd = -1;
  const int c = connect_peer(p, fd, 1000);
  if (c == 1) {
    m.reach = MemberStatus::Gone;
    return m;
  }
  if (c != 0) {
    m.reach = MemberStatus::Unreachable;
    return m;
  }
  char req[80];
  std::snprintf(req, sizeof req, "Q %llx %llu\n", static_cast<unsigned long long>(key), static_cast<unsigned long long>(seq));
  std::string line;
  int r = write_all(fd, req) ? read_line(fd, line, 2500) : 2;
  close(fd);
  if (r == 0 && parse_status(line, m)) return m;
  m.reach = r == 1 ? MemberStatus::NoAnswer : MemberStatus::Gone;
  return m;
}

std::string sig_text(const std::string& fn, long long count, int root) {
  std::string s = fn + "(count " + std::to_string(count);
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

// A collective of this rank has waited past the limit: ask every member where it is. The lowest
// world rank among those waiting in this same call writes the report; the others stay quiet.
void investigate(const CallView& cv) {
  CommWatch* w = cv.comm;
  const uint64_t key = w->key, seq = cv.seq;
  // All members at once (a stopped one costs the answer timeout once, not once per rank).
  std::vector<MemberStatus> ms(w->world.size());
  constexpr size_t kBatch = 32;
  for (size_t b = 0; b < ms.size(); b += kBatch) {
    std::vector<std::thread> ts;
    for (size_t i = b; i < std::min(ms.size(), b + kBatch); ++i)
      ts.emplace_back([&, i] { ms[i] = query(w->world[i], key, seq); });
    for (std::thread& t : ts) t.join();
  }
  auto waiting = [&](const MemberStatus& m) {
    return m.reach == MemberStatus::Ok && m.in_call && m.call_key == key && m.call_seq == seq;
  };
  int lowest = -1;
  for (const MemberStatus& m : ms)
    if (waiting(m) && (lowest < 0 || m.world < lowest)) lowest = m.world;
  if (lowest != g->rank) return;

  const double waited = static_cast<double>(now_ns() - cv.t0) / 1e9;
  nlohmann::json j;
  j["format"] = "libhier-hang/1";
  j["reported_by"] = g->rank;
  j["limit_s"] = g->limit_s;
  j["waited_s"] = waited;
  j["collective"] = fn_name(cv.fn);
  j["sequence"] = seq;
  j["communicator"] = {{"size", w->size}, {"world_ranks", w->world}, {"key", key}};
  nlohmann::json jw = nlohmann::json::array(), jm = nlohmann::json::array();
  std::vector<int> waiting_ranks;
  std::map<std::string, std::vector<int>> sigs;  // signature text -> ranks (mismatch check)
  std::vector<std::string> lines;
  char buf[512];
  std::snprintf(buf, sizeof buf, "HANG: %s #%llu on a communicator of %d ranks (world ranks %s) has waited %.1f s (HIER_WATCHDOG=%g)",
                fn_name(cv.fn), static_cast<unsigned long long>(seq), w->size, ranks_text(w->world).c_str(), waited,
                g->limit_s);
  lines.push_back(buf);
  for (const MemberStatus& m : ms) {
    if (waiting(m)) {
      waiting_ranks.push_back(m.world);
      sigs[sig_text(m.fn, m.count, m.root)].push_back(m.world);
      jw.push_back({{"rank", m.world}, {"host", m.host}, {"pid", m.pid}, {"call", m.fn}, {"count", m.count},
                    {"root", m.root}, {"call_site", m.site}, {"waited_ms", m.elapsed_ms}});
      continue;
    }
    nlohmann::json e = {{"rank", m.world}, {"host", m.host}, {"pid", m.pid}};
    std::string what;
    switch (m.reach) {
      case MemberStatus::Gone:
        what = "gone (its side channel is closed: the process exited or was killed)";
        e["state"] = "gone";
        break;
      case MemberStatus::NoAnswer:
        what = "not responding (stopped?): its side channel accepts but does not answer";
        e["state"] = "not_responding";
        break;
      case MemberStatus::Unreachable:
        what = "not responding (stopped?): its side channel cannot be reached (node down?)";
        e["state"] = "not_responding";
        break;
      case MemberStatus::Ok: {
        const uint64_t done = m.seq_on_comm;
        if (m.in_call && m.call_key == key && m.call_seq > seq) {
          what = "already past this call, in " + m.fn + " #" + std::to_string(m.call_seq) + " at " + m.site;
          e["state"] = "ahead";
        } else if (done >= seq) {
          what = "already left this call (it started " + std::to_string(done) + " collectives on this communicator)";
          e["state"] = "ahead";
        } else if (m.in_call) {
          what = "in " + m.fn + " on another communicator at " + m.site + " (" + std::to_string(m.elapsed_ms) + " ms)";
          e["state"] = "in_other_collective";
          e["call"] = m.fn;
          e["call_site"] = m.site;
        } else {
          what = m.doing;
          e["state"] = "not_arrived";
          e["doing"] = m.doing;
          if (!m.site.empty()) e["call_site"] = m.site;
        }
        if (done < seq) what += "; it has started " + std::to_string(done) + " of " + std::to_string(seq) + " collectives on this communicator";
        e["collectives_started"] = done;
        // A rank past this call ran a collective of its own at this sequence number.
        if (done >= seq && m.sig_at_seq != 0 && m.sig_at_seq != signature(base_fn(cv.fn), cv.count, cv.root)) {
          const int fn = static_cast<int>(m.sig_at_seq >> 48);
          const int root = static_cast<int>((m.sig_at_seq >> 32) & 0xffff) - 1;
          const long long cnt = static_cast<long long>(m.sig_at_seq & 0xffffffff);
          sigs[sig_text(fn_name(fn), cnt, root)].push_back(m.world);
        }
        break;
      }
    }
    e["what"] = what;
    jm.push_back(e);
    std::snprintf(buf, sizeof buf, "  missing rank %d (%s pid %ld): ", m.world, m.host.c_str(), m.pid);
    lines.push_back(buf + what);
  }
  std::string wl = "  waiting (" + std::to_string(waiting_ranks.size()) + "): ";
  for (const nlohmann::json& x : jw)
    wl += "rank " + std::to_string(x["rank"].get<int>()) + " at " + x["call_site"].get<std::string>() + "; ";
  lines.insert(lines.begin() + 1, wl);
  j["waiting"] = jw;
  j["missing"] = jm;
  if (sigs.size() > 1) {
    std::string mm = "  MISMATCH at this sequence number:";
    nlohmann::json jmm = nlohmann::json::array();
    for (auto& [s, r] : sigs) {
      mm += " ranks " + ranks_text(r) + " called " + s + ";";
      jmm.push_back({{"call", s}, {"ranks", r}});
    }
    lines.push_back(mm);
    j["mismatch"] = jmm;
  }
  for (const std::string& l : lines) log::write(config::LogLevel::Warn, "watchdog", __FILE__, __LINE__, "%s", l.c_str());
  const std::string text = j.dump(2);
  {
    std::lock_guard<std::mutex> lk(g->hangs_mu);
    g->hangs.push_back(text);
  }
  if (!g->report_dir.empty()) {
    const std::string path = g->report_dir + "/hier-hang-" + std::to_string(g->rank) + "-" + std::to_string(seq) + ".json";
    std::ofstream out(path, std::ios::trunc);
    out << text << '\n';
    if (!out) HIER_WARN("watchdog", "cannot write the hang report '%s'", path.c_str());
  }
}

void* investigate_main(void* p) {
  auto* cv = static_cast<CallView*>(p);
  investigate(*cv);
  delete cv;
  g->investigating.store(false);
  return nullptr;
}

void* thread_main(void*) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  std::set<std::pair<CallSlot*, uint64_t>> handled;
  const uint64_t limit_ns = static_cast<uint64_t>(g->limit_s * 1e9);
  const int tick_ms = std::clamp(static_cast<int>(g->limit_s * 1000 / 8), 20, 250);
  for (;;) {
    pollfd p[2] = {{g->listen_fd, POLLIN, 0}, {g->stop_pipe[0], POLLIN, 0}};
    const int r = poll(p, 2, tick_ms);
    if (r > 0 && (p[1].revents & POLLIN)) break;
    if (r > 0 && (p[0].revents & POLLIN)) serve_one(g->listen_fd);
    const uint64_t t = now_ns();
    const int ns = g->n_slots.load(std::memory_order_acquire);
    for (int i = 0; i < ns; ++i) {
      const CallView cv = read_slot(g->slots[i]);
      // A call that started after `t` was read has t0 > t.
      if (!cv.active || !cv.comm || cv.t0 > t || t - cv.t0 < limit_ns) continue;
      if (!handled.insert({&g->slots[i], cv.gen}).second) continue;
      // Investigated on a thread of its own: this one keeps answering the other ranks' queries
      // (they may be asking this rank at the same moment). One at a time.
      if (g->investigating.exchange(true)) {
        handled.erase({&g->slots[i], cv.gen});
        continue;
      }
      auto* arg = new CallView(cv);
      pthread_t t;
      pthread_attr_t at;
      pthread_attr_init(&at);
      pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
      if (pthread_create(&t, &at, investigate_main, arg) != 0) {
        delete arg;
        g->investigating.store(false);
      }
      pthread_attr_destroy(&at);
    }
  }
  return nullptr;
}

std::vector<uint32_t> local_ipv4() {
  std::vector<uint32_t> v;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) == 0) {
    for (ifaddrs* i = ifa; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
        continue;
      v.push_back(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    }
    freeifaddrs(ifa);
  }
  v.push_back(htonl(INADDR_LOOPBACK));
  return v;
}

}  // namespace

void watch_init(double limit_s, int world_rank, int world_size, const char* report_template) {
  if (limit_s <= 0 || world_size <= 0) return;
  g = new State();
  g->limit_s = limit_s;
  g->rank = world_rank;
  g->size = world_size;
  g->main_tid = static_cast<int>(syscall(SYS_gettid));
  if (report_template && *report_template) {
    const std::string path = util::expand_path_template(report_template, world_rank);
    const size_t s = path.rfind('/');
    g->report_dir = s == std::string::npos ? "." : (s == 0 ? "/" : path.substr(0, s));
  }
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &g->keyval, nullptr);
  // Side channel: every rank listens on an ephemeral port; the addresses go round once.
  State::Peer me{};
  g->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof sa;
  bool ok = g->listen_fd >= 0 && bind(g->listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
            listen(g->listen_fd, 64) == 0 && getsockname(g->listen_fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  if (ok) {
    me.port = ntohs(sa.sin_port);
    const std::vector<uint32_t> ips = local_ipv4();
    for (size_t i = 0; i < ips.size() && i < 4; ++i) me.ip[i] = ips[i];
    if (ips.size() > 4) me.ip[3] = htonl(INADDR_LOOPBACK);
  }
  me.pid = static_cast<int32_t>(getpid());
  gethostname(me.host, sizeof me.host - 1);
  g->peers.resize(static_cast<size_t>(world_size));
  // Every rank takes part even if its socket failed (port 0): the others then see it as unreachable.
  PMPI_Allgather(&me, sizeof me, MPI_BYTE, g->peers.data(), sizeof me, MPI_BYTE, MPI_COMM_WORLD);
  if (!ok || pipe2(g->stop_pipe, O_CLOEXEC) != 0) {
    HIER_WARN("watchdog", "HIER_WATCHDOG: no side channel (%s); the watchdog is off on this rank", std::strerror(errno));
    return;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);  // the thread starts with every signal blocked
  g->thread_started = pthread_create(&g->thread, nullptr, thread_main, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!g->thread_started) return;
  g_watch_on = true;
  HIER_INFO("watchdog", "HIER_WATCHDOG=%g: side channel on port %u", limit_s, me.port);
}

void watch_finalize() {
  if (!g || !g->thread_started) return;
  g_watch_on = false;
  const char c = 'x';
  if (write(g->stop_pipe[1], &c, 1) == 1) pthread_join(g->thread, nullptr);
  g->thread_started = false;
  close(g->listen_fd);
  g->listen_fd = -1;
}

std::string hangs_json() {
  std::string s = "[";
  if (!g) return s + "]";
  std::lock_guard<std::mutex> lk(g->hangs_mu);
  for (size_t i = 0; i < g->hangs.size(); ++i) s += (i ? "," : "") + g->hangs[i];
  return s + "]";
}

}  // namespace hier::diag
