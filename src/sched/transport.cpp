#include "sched/transport.hpp"

namespace hier::sched {

bool shm_runs(Kind k) {
  switch (k) {
    case Kind::ReduceScatter:
    case Kind::Allreduce:
    case Kind::Allgather:
    case Kind::Allgatherv:
    case Kind::Bcast:
    case Kind::Reduce:
    case Kind::Barrier: return true;
    default: return false;
  }
}

int route_shm(Schedule& s, const std::function<bool(const CommRef&)>& has_segment) {
  int n = 0;
  for (Step& st : s.steps)
    if (st.comm.on != On::None && shm_runs(st.kind) && has_segment(st.comm)) {
      st.via = Via::Shm;
      ++n;
    }
  return n;
}

}  // namespace hier::sched
