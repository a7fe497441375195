#include "diag/where.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "diag/python_site.hpp"

extern char** environ;

namespace hier::diag::where {

namespace {

struct Mapping {
  uintptr_t lo, hi;
  bool exec;
  std::string path;
};

std::vector<Mapping> read_maps() {
  std::vector<Mapping> out;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    Mapping m{};
    char perms[8] = {0};
    unsigned long lo = 0, hi = 0;
    int pos = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &pos) < 3) continue;
    m.lo = lo;
    m.hi = hi;
    m.exec = perms[2] == 'x';
    if (pos > 0 && static_cast<size_t>(pos) < line.size()) m.path = line.substr(static_cast<size_t>(pos));
    out.push_back(m);
  }
  return out;
}

const Mapping* find(const std::vector<Mapping>& maps, uintptr_t a) {
  for (const Mapping& m : maps)
    if (a >= m.lo && a < m.hi) return &m;
  return nullptr;
}

// Whether the bytes before `ra` end with an x86-64 call instruction (rel32, or indirect
// through a register or memory operand).
bool after_call(const Mapping& m, uintptr_t ra) {
#if defined(__x86_64__)
  if (ra < m.lo + 7) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(ra);
  if (p[-5] == 0xE8) return true;                                  // call rel32
  if (p[-2] == 0xFF && (p[-1] & 0xF8) == 0xD0) return true;         // call *%reg
  if (p[-3] == 0xFF && (p[-2] & 0x38) == 0x10) return true;         // call *disp8(%reg) / (%reg,...)
  if (p[-6] == 0xFF && (p[-5] & 0x38) == 0x10) return true;         // call *disp32(%rip|%reg)
  if (p[-7] == 0xFF && (p[-6] & 0x38) == 0x10) return true;         // with SIB byte
  if (p[-3] == 0x41 && p[-2] == 0xFF && (p[-1] & 0xF8) == 0xD0) return true;  // call *%r8-15
  return false;
#else
  (void)m;
  (void)ra;
  return true;
#endif
}

bool is_system_object(const std::string& path) {
  static const char* const kSystem[] = {"/libc.so", "/libc-", "/ld-linux", "/libpthread", "/libmpi", "/libopen-",
                                        "/libpmix", "/libucs", "/libucp", "/libuct", "/libhwloc", "/libevent",
                                        "/libhier", "/libstdc++", "/libgcc_s", "/libm.so", "/libdl", "/libfabric",
                                        "/libgfortran", "/libpython", "[vdso]", "/libhier_"};
  for (const char* s : kSystem)
    if (path.find(s) != std::string::npos) return true;
  // The Python interpreter (python3, python3.11): its frames name no line of the program's (its
  // Python lines: diag/python_site.hpp, for the calling thread only).
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.rfind("python", 0) == 0 && base.find_first_not_of("python0123456789.", 0) == std::string::npos) return true;
  return path.empty();
}

std::string basename_of(const std::string& p) {
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

struct Child {
  char** argv;
  char** envp;
  int out_fd;
};

int child_main(void* p) {
  auto* c = static_cast<Child*>(p);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  dup2(c->out_fd, 1);
  const int dn = open("/dev/null", O_WRONLY);
  if (dn >= 0) dup2(dn, 2);
  execve(c->argv[0], c->argv, c->envp);
  _exit(127);
}

// An absolute path only: the one found when libhier was configured (HIER_ADDR2LINE), else the
// system's. Never a $PATH walk: an empty or relative entry there means the job's directory, where
// anyone who can write would choose the program the watchdog starts.
std::string find_addr2line() {
#ifdef HIER_ADDR2LINE
  if (HIER_ADDR2LINE[0] == '/' && access(HIER_ADDR2LINE, X_OK) == 0) return HIER_ADDR2LINE;
#endif
  for (const char* p : {"/usr/bin/addr2line", "/bin/addr2line"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

// Each run is a process: results are cached per object and address, and at most kRunsPerSecond
// runs start in any second (more frames stay at their exported symbol names).
constexpr int kRunsPerSecond = 8;
std::mutex g_cache_mu;
std::map<std::pair<std::string, uintptr_t>, std::pair<std::string, std::string>> g_cache;  // -> (function, file:line)
time_t g_window = 0;
int g_runs_in_window = 0;

bool may_run_now() {
  const time_t t = time(nullptr);
  if (t != g_window) {
    g_window = t;
    g_runs_in_window = 0;
  }
  return g_runs_in_window++ < kRunsPerSecond;
}

// Runs `addr2line -f -C -e OBJ ADDR...` and returns its output lines. The child is started with
// clone() and no exit signal: no SIGCHLD reaches the program (it would interrupt and restart
// the system call its main thread sleeps in, and could meet a handler of the program's own).
std::vector<std::string> run_addr2line(const std::string& obj, const std::vector<uintptr_t>& addrs) {
  std::vector<std::string> lines;
  static const std::string tool = find_addr2line();
  if (tool.empty()) return lines;
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return lines;
  std::vector<std::string> args = {tool, "-f", "-C", "-e", obj};
  char buf[32];
  for (uintptr_t a : addrs) {
    std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(a));
    args.emplace_back(buf);
  }
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  // The preloaded libhier must not load into addr2line.
  std::vector<char*> envp;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) envp.push_back(*e);
  envp.push_back(nullptr);
  const int wfd = fcntl(pfd[1], F_DUPFD, 3);  // without O_CLOEXEC: survives execve as stdout
  Child c{argv.data(), envp.data(), wfd};
  std::vector<char> stack(256 * 1024);
  const pid_t pid = clone(child_main, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK, &c);
  close(wfd);
  close(pfd[1]);
  if (pid > 0) {
    std::string out;
    char rb[4096];
    ssize_t n;
    while ((n = read(pfd[0], rb, sizeof rb)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) out.append(rb, static_cast<size_t>(n));
    int st = 0;
    while (waitpid(pid, &st, __WCLONE) < 0 && errno == EINTR) {
    }
    std::istringstream is(out);
    std::string l;
    while (std::getline(is, l)) lines.push_back(l);
  }
  close(pfd[0]);
  return lines;
}

}  // namespace

std::vector<Frame> resolve(const std::vector<const void*>& ras) {
  std::vector<Frame> frames(ras.size());
  // object -> (index, address to look up)
  std::map<std::string, std::vector<std::pair<size_t, uintptr_t>>> by_obj;
  for (size_t i = 0; i < ras.size(); ++i) {
    Frame& f = frames[i];
    f.addr = ras[i];
    f.function = "??";
    const char *py_line = nullptr, *py_function = nullptr;
    if (python::describe(ras[i], &py_line, &py_function)) {  // a Python call site (diag/call_site.hpp)
      f.file_line = py_line;
      f.function = py_function;
      f.object = "python";
      continue;
    }
    const uintptr_t a = reinterpret_cast<uintptr_t>(ras[i]) - 1;  // inside the call instruction
    Dl_info di{};
    if (!dladdr(reinterpret_cast<void*>(a), &di) || !di.dli_fbase) {
      f.system = true;
      continue;
    }
    std::string obj = di.dli_fname ? di.dli_fname : "";
    if (obj.find('/') == std::string::npos) {  // the main program reports "" or its argv[0]
      char exe[4096];
      const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
      if (n > 0) obj.assign(exe, static_cast<size_t>(n));
    }
    f.object = obj;
    f.system = is_system_object(obj);
    if (di.dli_sname) f.function = di.dli_sname;
    // Shared objects and PIE executables are looked up by offset, fixed executables by address.
    const auto* eh = static_cast<const Elf64_Ehdr*>(di.dli_fbase);
    const uintptr_t look = eh->e_type == ET_DYN ? a - reinterpret_cast<uintptr_t>(di.dli_fbase) : a;
    f.offset = look;
    // System objects (libc, the MPI, libhier) carry no line information worth a process:
    // their exported symbol names (MPI_Recv, nanosleep) are enough.
    if (!f.system) by_obj[obj].push_back({i, look});
  }
  std::lock_guard<std::mutex> lk(g_cache_mu);
  for (auto& [obj, v] : by_obj) {
    // (frame index, offset) of the frames of obj not in the cache yet: one addr2line run for all.
    std::vector<std::pair<size_t, uintptr_t>> unresolved;
    for (auto& p : v) {
      const auto it = g_cache.find({obj, p.second});
      if (it == g_cache.end()) {
        unresolved.push_back(p);
        continue;
      }
      Frame& f = frames[p.first];
      if (!it->second.first.empty()) f.function = it->second.first;
      f.file_line = it->second.second;
    }
    if (unresolved.empty() || !may_run_now()) continue;
    std::vector<uintptr_t> addrs;
    for (auto& p : unresolved) addrs.push_back(p.second);
    const std::vector<std::string> lines = run_addr2line(obj, addrs);
    if (lines.size() != 2 * unresolved.size()) continue;
    for (size_t k = 0; k < unresolved.size(); ++k) {
      Frame& f = frames[unresolved[k].first];
      std::string fn;
      if (lines[2 * k] != "??") fn = f.function = lines[2 * k];
      std::string fl = lines[2 * k + 1];
      const size_t d = fl.find(" (discriminator");
      if (d != std::string::npos) fl.resize(d);
      if (fl.rfind("??", 0) != 0 && fl.find(":0") == std::string::npos && fl.find(":?") == std::string::npos)
        f.file_line = basename_of(fl);
      g_cache[{obj, unresolved[k].second}] = {fn, f.file_line};
    }
  }
  return frames;
}

std::string describe(const Frame& f) {
  if (!f.file_line.empty()) return f.file_line + " (" + f.function + ")";
  if (!f.object.empty() && f.function != "??") return f.function + " in " + basename_of(f.object);
  if (!f.object.empty()) {
    char off[32];
    std::snprintf(off, sizeof off, "+0x%lx", static_cast<unsigned long>(f.offset));
    return basename_of(f.object) + off;
  }
  // Never the raw address: it would tell whoever reads the report where the code is mapped.
  return "an unknown place";
}

namespace {
const char* syscall_name(long nr) {
#if defined(__x86_64__)
  switch (nr) {
    case 0: return "read";
    case 1: return "write";
    case 7: return "poll";
    case 23: return "select";
    case 34: return "pause";
    case 35: return "nanosleep";
    case 61: return "wait4";
    case 202: return "futex";
    case 230: return "clock_nanosleep";
    case 232: return "epoll_wait";
    case 219: return "restart_syscall";
    case 270: return "pselect6";
    case 271: return "ppoll";
    case 281: return "epoll_pwait";
    case 45: return "recvfrom";
    case 47: return "recvmsg";
    case 43: return "accept";
    default: return nullptr;
  }
#else
  (void)nr;
  return nullptr;
#endif
}
}  // namespace

ThreadLook look_at_thread(int tid) {
  ThreadLook t;
  const std::string dir = "/proc/self/task/" + std::to_string(tid);
  {
    std::ifstream st(dir + "/stat");
    std::string s;
    std::getline(st, s);
    const size_t rp = s.rfind(')');
    if (rp != std::string::npos && rp + 2 < s.size()) {
      const char c = s[rp + 2];
      static const std::map<char, const char*> kStates = {{'R', "running"}, {'S', "sleeping"}, {'D', "disk sleep"},
                                                          {'T', "stopped"}, {'t', "traced"},   {'Z', "zombie"}};
      auto it = kStates.find(c);
      t.state = it != kStates.end() ? it->second : std::string(1, c);
    }
  }
  std::ifstream sc(dir + "/syscall");
  std::string line;
  std::getline(sc, line);
  std::istringstream is(line);
  std::vector<std::string> tok;
  std::string w;
  while (is >> w) tok.push_back(w);
  if (tok.size() < 3) return t;  // "running"
  const long nr = std::strtol(tok[0].c_str(), nullptr, 10);
  if (nr >= 0) {
    const char* n = syscall_name(nr);
    t.syscall = n ? n : "syscall " + tok[0];
  }
  const uintptr_t sp = std::strtoul(tok[tok.size() - 2].c_str(), nullptr, 16);
  const std::vector<Mapping> maps = read_maps();
  const Mapping* stack = find(maps, sp);
  if (!stack) return t;
  const uintptr_t end = std::min<uintptr_t>(stack->hi, sp + 512 * 1024);
  for (uintptr_t p = sp & ~uintptr_t{7}; p + 8 <= end && t.stack.size() < 48; p += 8) {
    const uintptr_t v = *reinterpret_cast<const uintptr_t*>(p);
    const Mapping* m = find(maps, v);
    if (!m || !m->exec || m->path.empty() || m->path[0] == '[') continue;
    if (after_call(*m, v)) t.stack.push_back(reinterpret_cast<const void*>(v));
  }
  return t;
}

}  // namespace hier::diag::where
