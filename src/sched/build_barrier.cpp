// Barrier, level by level: every node synchronizes, the leaders synchronize (so every rank of
// every node has entered), every node synchronizes again to release its ranks.
#include "sched/build.hpp"

namespace hier::sched {

Schedule build_barrier(const topo::Shape& s, int rank) {
  Schedule out;
  out.name = "barrier/tree";
  Step b;
  b.kind = Kind::Barrier;
  b.comm = {On::Node, 0};
  out.steps.push_back(b);
  if (s.local_of[rank] == 0) {
    b.comm = {On::Leaders, 0};
    out.steps.push_back(b);
    b.comm = {On::Node, 0};
  }
  out.steps.push_back(b);
  return out;
}

Schedule even_barrier(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)units, (void)unit_bytes, (void)a;
  return build_barrier(s, rank);
}

}  // namespace hier::sched
