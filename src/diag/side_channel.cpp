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

#include "diag/log.hpp"
#include "util/sha256.hpp"

namespace hier::diag::channel {

namespace {

constexpr int kMaxAddrs = 4;
constexpr int kConnectMs = 1000, kAnswerMs = 2500, kServeMs = 2000;

// One rank's entry of the allgathered table (plain bytes: same layout on every rank of one build).
struct Peer {
  uint32_t ip[kMaxAddrs];      // network order; 0 = none
  uint16_t port[kMaxAddrs];
  int32_t pid;
  char host[64];
  char boot_id[40];            // /proc/sys/kernel/random/boot_id: which kernel
  uint64_t netns;              // inode of /proc/self/ns/net: which network namespace on it
  uint8_t secret_part[32];     // this rank's share of the job's secret
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
  if (v.size() > kMaxAddrs - 1) v.resize(kMaxAddrs - 1);
  v.push_back(htonl(INADDR_LOOPBACK));  // last: for peers on this host only
  return v;
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
  std::string buf;
};

// The query line's fields: Q from to to_pid nonce key seq brief, then the mac (tab-separated).
std::string serve_line(const std::string& line) {
  std::string text;
  if (!split_verified(line, text)) return {};
  int from = -1, to = -1, brief = 0;
  long to_pid = 0;
  char nonce[33] = {};
  unsigned long long key = 0, seq = 0;
  if (std::sscanf(text.c_str(), "Q\t%d\t%d\t%ld\t%32[0-9a-f]\t%llx\t%llu\t%d", &from, &to, &to_pid, nonce, &key, &seq,
                  &brief) != 7)
    return {};
  // For this very process: a query captured on its way to another rank (or to a process that
  // took over a dead rank's port) gets nothing here.
  if (to != c->rank || to_pid != static_cast<long>(getpid()) || from < 0 || from >= c->size) return {};
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
            reply = serve_line(cn.buf.substr(0, nl));
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
        conns.push_back({fd, t + kServeMs, {}});
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
  bool ok = random_bytes(me.secret_part, sizeof me.secret_part);
  if (!ok) err = "getrandom failed";
  if (ok) {
    const std::vector<uint32_t> ips = local_ipv4();
    for (uint32_t ip : ips) {
      uint16_t port = 0;
      const int fd = listen_on(ip, port);
      if (fd < 0) continue;
      me.ip[c->n_listen] = ip;
      me.port[c->n_listen] = port;
      c->listen_fd[c->n_listen++] = fd;
    }
    ok = c->n_listen > 0 && pipe2(c->stop_pipe, O_CLOEXEC) == 0;
    if (!ok) err = c->n_listen ? std::strerror(errno) : "no address to listen on";
  }
  if (!ok) {  // advertised as no address: the others see this rank as unreachable
    for (int i = 0; i < c->n_listen; ++i) close(c->listen_fd[i]);
    c->n_listen = 0;
    std::memset(me.ip, 0, sizeof me.ip);
  }
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
  return ok;
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
  uint8_t nb[16];
  if (!random_bytes(nb, sizeof nb)) return Reach::Unreachable;
  const std::string nonce = util::to_hex(nb, sizeof nb);
  char head[160];
  std::snprintf(head, sizeof head, "Q\t%d\t%d\t%ld\t%s\t%llx\t%llu\t%d", c->rank, to, static_cast<long>(p.pid),
                nonce.c_str(), static_cast<unsigned long long>(q.key), static_cast<unsigned long long>(q.seq),
                q.brief ? 1 : 0);
  const std::string query = std::string(head) + "\t" + mac_hex(head) + "\n";
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
    std::string line;
    const int rr = send_all(fd, query, kConnectMs) ? read_line(fd, line, kAnswerMs) : 2;
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
