#include "diag/side_channel.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <vector>

#include "config/config.hpp"
#include "diag/log.hpp"
#include "util/sha256.hpp"

namespace hier::diag::channel {

namespace {

constexpr int kMaxAddrs = 4;
constexpr int kMaxCandidates = 8;
constexpr int kConnectMs = 1000, kAnswerMs = 2500, kServeMs = 2000;

// One rank's entry of the first allgather (plain bytes: same layout on every rank of one build):
// who it is and every IPv4 address it has, from which each rank chooses where it listens.
struct Peer {
  uint32_t ip[kMaxAddrs];      // where it listens (network order; 0 = none): the second allgather
  uint16_t port[kMaxAddrs];
  int32_t pid;
  char host[64];
  char boot_id[40];            // /proc/sys/kernel/random/boot_id: which kernel
  uint64_t netns;              // inode of /proc/self/ns/net: which network namespace on it
  uint32_t have[kMaxCandidates];  // its up, non-loopback IPv4 addresses (0 = none)
  uint8_t secret_part[32];     // this rank's share of the job's secret
};

// The second allgather: the addresses and ports each rank listens on.
struct Bound {
  uint32_t ip[kMaxAddrs];
  uint16_t port[kMaxAddrs];
};

struct Channel {
  int rank = -1, size = 0;
  std::vector<Peer> peers;
  uint8_t secret[32] = {};
  int listen_fd[kMaxAddrs] = {-1, -1, -1, -1};
  int n_listen = 0;
  int stop_pipe[2] = {-1, -1};
  pthread_t thread{};
  bool thread_started = false;
  std::function<std::string(const Query&)> answer;
};

Channel* c = nullptr;  // never freed: the server thread may outlive finalize at exit

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

bool random_bytes(uint8_t* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

std::string mac_hex(const std::string& msg) {
  const util::Digest d = util::hmac_sha256(c->secret, sizeof c->secret, msg.data(), msg.size());
  return util::to_hex(d.data(), d.size());
}

// "<text>\t<mac>": true when the mac is HMAC(secret, text); `text` set.
bool split_verified(const std::string& line, std::string& text) {
  const size_t t = line.rfind('\t');
  if (t == std::string::npos || line.size() - t - 1 != 64) return false;
  text = line.substr(0, t);
  const std::string want = mac_hex(text);
  return util::equal_constant_time(want.data(), line.data() + t + 1, 64);
}

std::vector<Iface> local_ifaces() {
  std::vector<Iface> v;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) == 0) {
    for (ifaddrs* i = ifa; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      Iface f;
      f.name = i->ifa_name ? i->ifa_name : "";
      f.addr = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      f.mask = i->ifa_netmask ? reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr : 0xffffffffu;
      f.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
      v.push_back(f);
    }
    freeifaddrs(ifa);
  }
  return v;
}

// The local address the kernel would send from to `to` (a UDP socket's connect sends nothing);
// 0 when there is no route.
uint32_t route_source(uint32_t to) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(9);
  sa.sin_addr.s_addr = to;
  socklen_t len = sizeof sa;
  uint32_t from = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    from = sa.sin_addr.s_addr;
  close(fd);
  return from;
}

int listen_on(uint32_t ip, uint16_t& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = ip;
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    close(fd);
    return -1;
  }
  port = ntohs(sa.sin_port);
  return fd;
}

void read_identity(Peer& me) {
  gethostname(me.host, sizeof me.host - 1);
  const int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = read(fd, me.boot_id, sizeof me.boot_id - 1);
    (void)n;
    close(fd);
  }
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) == 0) me.netns = st.st_ino;
}

bool same_host(const Peer& a, const Peer& b) {
  return a.boot_id[0] && std::strncmp(a.boot_id, b.boot_id, sizeof a.boot_id) == 0 && a.netns == b.netns;
}

bool send_all(int fd, const std::string& s, int ms) {
  size_t off = 0;
  const uint64_t end = now_ms() + static_cast<uint64_t>(ms);
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const uint64_t t = now_ms();
      if (t >= end) return false;
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, static_cast<int>(end - t));
      continue;
    }
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Server: a poll set of the listening sockets, the stop pipe and the open connections.

struct Conn {
  int fd;
  uint64_t deadline_ms;
  std::string challenge;  // the nonce this connection's query must carry (hex)
  std::string buf;
};

// The challenge a connection gets on accept: "C\t<32 hex digits>\n", fresh random bytes.
bool make_challenge(std::string& hex) {
  uint8_t nb[16];
  if (!random_bytes(nb, sizeof nb)) return false;
  hex = util::to_hex(nb, sizeof nb);
  return true;
}

// The query line's fields: Q from to to_pid nonce challenge key seq brief, then the mac
// (tab-separated). `challenge`: the one this connection was sent.
std::string serve_line(const std::string& line, const std::string& challenge) {
  std::string text;
  if (!split_verified(line, text)) return {};
  int from = -1, to = -1, brief = 0;
  long to_pid = 0;
  char nonce[33] = {}, chal[33] = {};
  unsigned long long key = 0, seq = 0;
  if (std::sscanf(text.c_str(), "Q\t%d\t%d\t%ld\t%32[0-9a-f]\t%32[0-9a-f]\t%llx\t%llu\t%d", &from, &to, &to_pid, nonce,
                  chal, &key, &seq, &brief) != 8)
    return {};
  // For this very process: a query captured on its way to another rank (or to a process that
  // took over a dead rank's port) gets nothing here; nor does one captured earlier and replayed
  // (its MAC covers the challenge of the connection it was made for, not this one's).
  if (to != c->rank || to_pid != static_cast<long>(getpid()) || from < 0 || from >= c->size) return {};
  if (challenge.size() != 32 || !util::equal_constant_time(challenge.data(), chal, 32)) return {};
  Query q;
  q.from = from;
  q.key = key;
  q.seq = seq;
  q.brief = brief != 0;
  std::string body = c->answer(q);
  for (char& ch : body)
    if (ch == '\n' || ch == '\r') ch = ' ';
  const std::string a = "A\t" + std::string(nonce) + "\t" + std::to_string(c->rank) + "\t" +
                        std::to_string(getpid()) + "\t" + body;
  return a + "\t" + mac_hex(a) + "\n";
}

void serve_loop() {
  std::deque<Conn> conns;
  std::vector<pollfd> pfd;
  for (;;) {
    pfd.clear();
    pfd.push_back({c->stop_pipe[0], POLLIN, 0});
    for (int i = 0; i < c->n_listen; ++i) pfd.push_back({c->listen_fd[i], POLLIN, 0});
    const size_t first_conn = pfd.size();
    uint64_t t = now_ms(), next = t + 1000;
    for (const Conn& k : conns) {
      pfd.push_back({k.fd, POLLIN, 0});
      next = std::min(next, k.deadline_ms);
    }
    const int r = poll(pfd.data(), pfd.size(), next > t ? static_cast<int>(next - t) : 0);
    if (r < 0 && errno != EINTR) return;
    if (pfd[0].revents) return;
    t = now_ms();
    // Connections first (their pollfd indices are valid only before accepts change `conns`).
    std::vector<bool> drop(conns.size(), false);
    for (size_t k = 0; k < conns.size(); ++k) {
      Conn& cn = conns[k];
      if (pfd[first_conn + k].revents) {
        char b[512];
        const ssize_t n = recv(cn.fd, b, sizeof b, MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) {
          drop[k] = true;
          continue;
        }
        if (n > 0) cn.buf.append(b, static_cast<size_t>(n));
        const size_t nl = cn.buf.find('\n');
        if (nl != std::string::npos && nl < kMaxQueryBytes) {
          std::string reply;
          try {
            reply = serve_line(cn.buf.substr(0, nl), cn.challenge);
          } catch (...) {  // nothing from outside may end the rank
            reply.clear();
          }
          if (!reply.empty()) send_all(cn.fd, reply, 500);
          drop[k] = true;
          continue;
        }
        if (cn.buf.size() >= kMaxQueryBytes) {  // too long for a query: dropped unread
          drop[k] = true;
          continue;
        }
      }
      if (t >= cn.deadline_ms) drop[k] = true;
    }
    std::deque<Conn> keep;
    for (size_t k = 0; k < conns.size(); ++k) {
      if (drop[k]) close(conns[k].fd);
      else keep.push_back(std::move(conns[k]));
    }
    conns.swap(keep);
    for (int i = 0; i < c->n_listen; ++i) {
      if (!pfd[1 + static_cast<size_t>(i)].revents) continue;
      for (int a = 0; a < 64; ++a) {  // drain the backlog a bit at a time
        const int fd = accept4(c->listen_fd[i], nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        if (static_cast<int>(conns.size()) >= kMaxConnections) {
          close(conns.front().fd);
          conns.pop_front();
        }
        // The challenge goes out at once (a few bytes into an empty send buffer: never blocks).
        std::string chal;
        const std::string line = make_challenge(chal) ? "C\t" + chal + "\n" : std::string();
        if (line.empty() || send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(line.size())) {
          close(fd);
          continue;
        }
        conns.push_back({fd, t + kServeMs, chal, {}});
      }
    }
  }
}

void* server_main(void*) {
  try {
    serve_loop();
  } catch (...) {
    HIER_WARN("watchdog", "side channel: the server stopped on an internal error; queries go unanswered");
  }
  return nullptr;
}

// Connects to one address. 0: connected, 1: refused, 2: no answer / unreachable.
int connect_to(uint32_t ip, uint16_t port, int& fd_out) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return 2;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = ip;
  int r = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int result = 2;
  if (r < 0 && errno == EINPROGRESS) {
    pollfd pf{fd, POLLOUT, 0};
    if (poll(&pf, 1, kConnectMs) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) r = 0;
      else if (err == ECONNREFUSED) result = 1;
    }
  } else if (r < 0 && errno == ECONNREFUSED) {
    result = 1;
  }
  if (r == 0) {
    fd_out = fd;
    return 0;
  }
  close(fd);
  return result;
}

// Reads one line of at most kMaxAnswerBytes within `ms`. 0: ok, 1: timeout, 2: closed / too long.
int read_line(int fd, std::string& line, int ms) {
  line.clear();
  const uint64_t end = now_ms() + static_cast<uint64_t>(ms);
  char b[4096];
  for (;;) {
    const uint64_t t = now_ms();
    if (t >= end) return 1;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(end - t));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 1;
    const ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return 2;
    line.append(b, static_cast<size_t>(n));
    const size_t nl = line.find('\n');
    if (nl != std::string::npos) {
      line.resize(nl);
      return 0;
    }
    if (line.size() > kMaxAnswerBytes) return 2;
  }
}

}  // namespace

bool open(int world_rank, int world_size, std::string& err) {
  c = new Channel();
  c->rank = world_rank;
  c->size = world_size;
  Peer me{};
  const std::vector<Iface> ifs = local_ifaces();
  int n_have = 0;
  for (const Iface& f : ifs)
    if (!f.loopback && n_have < kMaxCandidates) me.have[n_have++] = f.addr;
  bool ok = random_bytes(me.secret_part, sizeof me.secret_part);
  if (!ok) err = "getrandom failed";
  me.pid = static_cast<int32_t>(getpid());
  read_identity(me);
  c->peers.resize(static_cast<size_t>(world_size));
  PMPI_Allgather(&me, sizeof me, MPI_BYTE, c->peers.data(), sizeof me, MPI_BYTE, MPI_COMM_WORLD);
  // The job's secret: every rank's share, in rank order (no single rank's random bytes decide it).
  std::vector<uint8_t> all;
  for (const Peer& p : c->peers) all.insert(all.end(), p.secret_part, p.secret_part + sizeof p.secret_part);
  const util::Digest d = util::sha256(all.data(), all.size());
  std::memcpy(c->secret, d.data(), sizeof c->secret);
  for (Peer& p : c->peers) std::memset(p.secret_part, 0, sizeof p.secret_part);  // not kept
  // Where to listen: the addresses the job uses between this host and the others.
  bool one_host = true;
  std::vector<std::vector<uint32_t>> others;
  for (const Peer& p : c->peers) {
    if (same_host(p, me)) continue;
    one_host = false;
    std::vector<uint32_t> a;
    for (uint32_t ip : p.have)
      if (ip) a.push_back(ip);
    others.push_back(std::move(a));
  }
  Bound b{};
  if (ok) {
    const std::vector<uint32_t> ips = choose_addresses(ifs, others, one_host, config::get().watchdog_if, route_source, err);
    for (uint32_t ip : ips) {
      if (c->n_listen == kMaxAddrs) break;
      uint16_t port = 0;
      const int fd = listen_on(ip, port);
      if (fd < 0) continue;
      b.ip[c->n_listen] = ip;
      b.port[c->n_listen] = port;
      c->listen_fd[c->n_listen++] = fd;
    }
    ok = c->n_listen > 0 && pipe2(c->stop_pipe, O_CLOEXEC) == 0;
    if (!ok && err.empty()) err = c->n_listen ? std::strerror(errno) : "no address to listen on";
  }
  if (!ok) {  // advertised as no address: the others see this rank as unreachable
    for (int i = 0; i < c->n_listen; ++i) close(c->listen_fd[i]);
    c->n_listen = 0;
    b = Bound{};
  }
  std::vector<Bound> bound(static_cast<size_t>(world_size));
  PMPI_Allgather(&b, sizeof b, MPI_BYTE, bound.data(), sizeof b, MPI_BYTE, MPI_COMM_WORLD);
  for (size_t r = 0; r < bound.size(); ++r) {
    std::memcpy(c->peers[r].ip, bound[r].ip, sizeof bound[r].ip);
    std::memcpy(c->peers[r].port, bound[r].port, sizeof bound[r].port);
  }
  return ok;
}

std::vector<uint32_t> choose_addresses(const std::vector<Iface>& mine, const std::vector<std::vector<uint32_t>>& others,
                                       bool one_host, const std::string& named,
                                       const std::function<uint32_t(uint32_t)>& route, std::string& err) {
  std::vector<uint32_t> out;
  auto add = [&](uint32_t ip) {
    if (ip && std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
  };
  if (!named.empty()) {
    std::string names;
    for (const Iface& f : mine) {
      if (f.name == named) add(f.addr);
      if (names.find(" " + f.name + ",") == std::string::npos) names += " " + f.name + ",";
    }
    if (out.empty()) {
      if (!names.empty()) names.pop_back();
      err = "HIER_WATCHDOG_IF=" + named + ": no interface of that name with an IPv4 address on this host (its interfaces:" +
            (names.empty() ? std::string(" none") : names) + ")";
    }
    return out;
  }
  if (one_host) {
    for (const Iface& f : mine)
      if (f.loopback) add(f.addr);
    if (out.empty()) add(htonl(INADDR_LOOPBACK));
    return out;
  }
  // Each interface's reach: how many ranks on other hosts have an address in its subnet that is
  // not also one of this host's own (the same 172.17.0.1 of a container bridge on every node
  // connects nothing).
  auto is_mine = [&](uint32_t ip) {
    return std::any_of(mine.begin(), mine.end(), [&](const Iface& f) { return f.addr == ip; });
  };
  std::vector<size_t> reach(mine.size(), 0);
  size_t best = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    const Iface& f = mine[i];
    if (f.loopback) continue;
    for (const std::vector<uint32_t>& o : others)
      if (std::any_of(o.begin(), o.end(), [&](uint32_t ip) { return (ip & f.mask) == (f.addr & f.mask) && !is_mine(ip); }))
        ++reach[i];
    best = std::max(best, reach[i]);
  }
  if (best > 0) {
    for (size_t i = 0; i < mine.size(); ++i)
      if (reach[i] == best) add(mine[i].addr);
    return out;
  }
  // No subnet holds the other nodes (a routed network): the address the kernel sends from to them.
  for (const std::vector<uint32_t>& o : others)
    for (uint32_t ip : o) {
      if (is_mine(ip)) continue;
      const uint32_t from = route ? route(ip) : 0;
      if (from && from != htonl(INADDR_LOOPBACK) && is_mine(from)) add(from);
    }
  if (out.empty()) err = "no interface of this host reaches the other nodes' addresses";
  return out;
}

bool start_server(std::function<std::string(const Query&)> answer) {
  if (!c || !c->n_listen) return false;
  c->answer = std::move(answer);
  c->thread_started = pthread_create(&c->thread, nullptr, server_main, nullptr) == 0;
  return c->thread_started;
}

void stop() {
  if (!c) return;
  if (c->thread_started) {
    const char x = 'x';
    if (write(c->stop_pipe[1], &x, 1) == 1) pthread_join(c->thread, nullptr);
    c->thread_started = false;
  }
  for (int i = 0; i < c->n_listen; ++i) close(c->listen_fd[i]);
  c->n_listen = 0;
}

Reach ask(int to, const Query& q, std::string& body) {
  if (!c || to < 0 || to >= c->size) return Reach::Unreachable;
  const Peer& p = c->peers[static_cast<size_t>(to)];
  const Peer& me = c->peers[static_cast<size_t>(c->rank)];
  const bool local = same_host(p, me);
  std::string nonce;
  if (!make_challenge(nonce)) return Reach::Unreachable;
  // The query for one connection: its MAC covers the challenge that connection was sent.
  auto query_for = [&](const std::string& chal) {
    char head[200];
    std::snprintf(head, sizeof head, "Q\t%d\t%d\t%ld\t%s\t%s\t%llx\t%llu\t%d", c->rank, to, static_cast<long>(p.pid),
                  nonce.c_str(), chal.c_str(), static_cast<unsigned long long>(q.key),
                  static_cast<unsigned long long>(q.seq), q.brief ? 1 : 0);
    return std::string(head) + "\t" + mac_hex(head) + "\n";
  };
  Reach result = Reach::Unreachable;
  bool refused_all = true, tried = false;
  // Same host: loopback first (the peer listens there too); another host: never loopback, which
  // would reach whatever listens on that port here.
  std::vector<int> order;
  for (int a = 0; a < kMaxAddrs; ++a)
    if (p.ip[a] && p.ip[a] == htonl(INADDR_LOOPBACK) && local) order.push_back(a);
  for (int a = 0; a < kMaxAddrs; ++a)
    if (p.ip[a] && p.ip[a] != htonl(INADDR_LOOPBACK)) order.push_back(a);
  for (int a : order) {
    tried = true;
    int fd = -1;
    const int cr = connect_to(p.ip[a], p.port[a], fd);
    if (cr == 1) continue;
    refused_all = false;
    if (cr != 0) continue;
    // The server's challenge first, then the query that answers it.
    std::string line;
    int rr = read_line(fd, line, kAnswerMs);
    if (rr == 0) {
      if (line.size() == 34 && line.compare(0, 2, "C\t") == 0 &&
          line.find_first_not_of("0123456789abcdef", 2) == std::string::npos)
        rr = send_all(fd, query_for(line.substr(2)), kConnectMs) ? read_line(fd, line, kAnswerMs) : 2;
      else
        rr = 2;
    }
    close(fd);
    if (rr == 1) return Reach::NoAnswer;  // accepted and silent: stopped (another address would cost the same)
    std::string text;
    if (rr != 0 || !split_verified(line, text)) {
      result = Reach::Gone;  // closed without an answer, or not the job's answer: try another address
      continue;
    }
    // "A nonce rank pid body": fresh, from the rank and process the table names.
    const std::string want = "A\t" + nonce + "\t" + std::to_string(to) + "\t" + std::to_string(p.pid) + "\t";
    if (text.compare(0, want.size(), want) != 0) {
      result = Reach::Gone;
      continue;
    }
    body = text.substr(want.size());
    return Reach::Ok;
  }
  if (tried && refused_all) return Reach::Gone;
  return result;
}

std::string addresses() {
  std::string s;
  if (!c) return s;
  const Peer& me = c->peers[static_cast<size_t>(c->rank)];
  for (int a = 0; a < kMaxAddrs; ++a) {
    if (!me.ip[a]) continue;
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &me.ip[a], ip, sizeof ip);
    s += (s.empty() ? "" : " ") + std::string(ip) + ":" + std::to_string(me.port[a]);
  }
  return s;
}

std::string host_of(int r) {
  if (!c || r < 0 || r >= c->size) return {};
  const Peer& p = c->peers[static_cast<size_t>(r)];
  return std::string(p.host, strnlen(p.host, sizeof p.host));
}

long pid_of(int r) { return c && r >= 0 && r < c->size ? c->peers[static_cast<size_t>(r)].pid : 0; }

}  // namespace hier::diag::channel
