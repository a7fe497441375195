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

bool inside_node(const CommRef& c, const topo::Shape& s) {
  switch (c.on) {
    case On::Node: return s.inside_node(topo::Shape::Comm::Node);
    case On::Step: return s.inside_node(topo::Shape::Comm::Step, c.level);
    default: return false;  // cross and leaders cross the nodes
  }
}

int mark_shm(Schedule& s, const std::function<bool(const CommRef&)>& pred) {
  int n = 0;
  for (Step& st : s.steps)
    if (st.comm.on != On::None && shm_runs(st.kind) && pred(st.comm)) {
      st.via = Via::Shm;
      ++n;
    }
  return n;
}

int route_shm(Schedule& s, const topo::Shape& shape, const std::function<bool(const CommRef&)>& has_segment) {
  return mark_shm(s, [&](const CommRef& c) { return inside_node(c, shape) && (!has_segment || has_segment(c)); });
}

}  // namespace hier::sched
