// libhier's logger. The level is checked before anything is formatted; every message carries
// file:line; the destination is stderr or HIER_DEBUG_FILE (%h %p %r expanded).
#pragma once

#include <atomic>

#include "config/config.hpp"

namespace hier::log {

extern std::atomic<config::LogLevel> g_level;

inline bool enabled(config::LogLevel l) { return l <= g_level.load(std::memory_order_relaxed) && l != config::LogLevel::None; }

// Opens HIER_DEBUG_FILE (if set) for this rank and sets the level; called once at init.
void init(const config::Config& cfg, int rank);
void shutdown();

void write(config::LogLevel level, const char* subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace hier::log

#define HIER_LOG(level, subsys, ...)                                                  \
  do {                                                                                \
    if (::hier::log::enabled(level)) ::hier::log::write(level, subsys, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define HIER_WARN(subsys, ...) HIER_LOG(::hier::config::LogLevel::Warn, subsys, __VA_ARGS__)
#define HIER_INFO(subsys, ...) HIER_LOG(::hier::config::LogLevel::Info, subsys, __VA_ARGS__)
#define HIER_TRACE(subsys, ...) HIER_LOG(::hier::config::LogLevel::Trace, subsys, __VA_ARGS__)
