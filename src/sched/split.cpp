#include "sched/build.hpp"

namespace hier::sched {

Split split_even(int64_t n, int parts) {
  Split s;
  s.counts.resize(parts);
  s.displs.resize(parts);
  int64_t off = 0;
  for (int i = 0; i < parts; ++i) {
    s.counts[i] = n / parts + (i < n % parts ? 1 : 0);
    s.displs[i] = off;
    off += s.counts[i];
  }
  return s;
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Flat: return "flat";
    case Algorithm::RsArAg: return "rs-ar-ag";
    case Algorithm::TreeAllreduce: return "tree";
    case Algorithm::RsLevels: return "rs-levels";
    case Algorithm::AgLevels: return "ag-levels";
    case Algorithm::ScatterAllgather: return "scatter-allgather";
    case Algorithm::TwoStep: return "two-step";
    case Algorithm::Tree: return "tree";
    case Algorithm::RsReduceGather: return "rs-reduce-gather";
    case Algorithm::TwoPhase: return "two-phase";
  }
  return "?";
}

void uniform_to_allgather(Step& ag) {
  ag.kind = Kind::Allgatherv;
  for (int64_t c : ag.counts)
    if (c != ag.counts[0]) return;
  ag.kind = Kind::Allgather;
  ag.count = ag.counts.empty() ? 0 : ag.counts[0];
  ag.counts.clear();
  ag.displs.clear();
}

}  // namespace hier::sched
