// Call-site timing inside src/diag (not for other layers): what each thread's table of call
// sites (site_timing.cpp, filled by DiagScope on the hot path) holds when the finalize exchange
// (sites.cpp) or the report at exit reads it.
#pragma once

#include <cstdint>
#include <vector>

namespace hier::diag {

constexpr int kSiteWin = 32;  // durations kept per site: the last kSiteWin calls

// One (collective, return address) of one thread, as it stands now.
struct TimedSite {
  const void* ra;  // the call site (diag/call_site.hpp)
  int fn;
  uint64_t calls, bytes, total, min, max;  // time in ns
  std::vector<float> win;                  // the last min(calls, kSiteWin) durations, oldest first
};

// Every thread's sites; `dropped`: the calls at sites beyond the tables' capacity.
std::vector<TimedSite> timed_sites(uint64_t& dropped);

}  // namespace hier::diag
