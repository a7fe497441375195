// Straggler detection (the report's `stragglers` section, rank 0 at finalize): which rank the
// others persistently waited for at a call site, and how much time they lost. A pure function
// of the ranks' timing records, kept apart from the MPI exchange (sites.cpp) so that its rules
// are tested on synthetic data (tests/unit/straggler_test.cpp). docs/diagnostics.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hier/fn.hpp"

namespace hier::diag {

// Collectives no rank can leave before every rank arrived: the time inside one of them measures
// the wait for the last rank. Rooted ones (a bcast root leaves at once) and scans are not.
bool waits_for_all(Fn base);

// One rank's record of one call site.
struct SiteSample {
  bool present = false;  // false: the rank has no record of this site
  int fn = -1;           // hier::Fn of the call
  uint64_t calls = 0;
  double total_ns = 0;          // time inside the call, summed over every call
  const float* win = nullptr;   // durations (ns) of its last nwin calls, oldest first
  uint32_t nwin = 0;            // 0: the site's calls could not be aligned with other ranks'
};

// One call site: its name and each rank's record (index = rank, one per rank of the job).
struct SiteSamples {
  std::string name;
  std::vector<SiteSample> ranks;
};

struct Straggler {
  int rank = 0, fn = 0;
  std::string site;
  uint64_t calls = 0;
  int last_in = 0, of_last = 0;  // last to arrive in last_in of the of_last calls compared
  double mean_late_s = 0;        // per call it was last in, how much later than the others' median
  double time_s = 0, median_time_s = 0;  // its time inside the call, the median over all ranks
  double others_lost_s = 0;      // the other ranks' time inside beyond its own, summed
};

struct StragglerResult {
  int compared_sites = 0;   // sites every rank recorded alike, of a collective all ranks wait in
  int unmatched_sites = 0;  // sites some rank lacks, or recorded with other calls or function
  std::vector<Straggler> ranks;  // most time lost first
};

// The rules (docs/diagnostics.md "Stragglers"), per site of a waits_for_all collective that every
// rank recorded with the same calls:
//  - per call in the last calls that every rank holds, the rank with the least time inside
//    arrived last, when its time is below the others' median by at least max(20 us, half of it);
//  - the rank last most often is named when it was last in at least 2/3 of those calls (3 calls
//    compared at least) and its total time inside is at least 25 % below the median total.
StragglerResult find_stragglers(const std::vector<SiteSamples>& sites);

}  // namespace hier::diag
