#include "diag/log.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "util/files.hpp"
#include "util/strings.hpp"

namespace hier::log {

std::atomic<config::LogLevel> g_level{config::LogLevel::Warn};

namespace {
std::mutex g_mu;
FILE* g_out = nullptr;  // nullptr = stderr
int g_rank = -1;

const char* level_name(config::LogLevel l) {
  switch (l) {
    case config::LogLevel::Warn: return "WARN";
    case config::LogLevel::Info: return "INFO";
    case config::LogLevel::Trace: return "TRACE";
    default: return "";
  }
}
}  // namespace

void init(const config::Config& cfg, int rank) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_rank = rank;
  g_level = cfg.debug;
  if (!cfg.debug_file.empty() && !g_out) {
    const std::string path = util::expand_path_template(cfg.debug_file, rank);
    // Never a file planted at the path (a shared directory): a new one of this user's, or an
    // existing regular file of this user's (util/files.hpp).
    std::string err;
    const int fd = util::open_append_owned(path, err);
    g_out = fd >= 0 ? fdopen(fd, "a") : nullptr;
    if (fd >= 0 && !g_out) {
      err = std::strerror(errno);
      close(fd);
    }
    if (!g_out)
      std::fprintf(stderr,
                   "libhier: WARN: HIER_DEBUG_FILE: cannot open '%s' (%s): only a new file or a regular file of "
                   "this user's; logging to stderr\n",
                   path.c_str(), err.c_str());
  }
}

void shutdown() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

void write(config::LogLevel level, const char* subsys, const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lk(g_mu);
  FILE* out = g_out ? g_out : stderr;
  if (g_rank >= 0)
    std::fprintf(out, "libhier[%d] %s %s %s:%d: %s\n", g_rank, level_name(level), subsys, base, line, msg);
  else
    std::fprintf(out, "libhier[pid %d] %s %s %s:%d: %s\n", static_cast<int>(getpid()), level_name(level), subsys, base,
                 line, msg);
  std::fflush(out);
}

}  // namespace hier::log
