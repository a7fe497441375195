#include "exec/executor.hpp"

#include <climits>
#include <cstring>
#include <vector>

#include "exec/direct.hpp"
#include "exec/typed.hpp"
#include "sched/tuning.hpp"

namespace hier::exec {
namespace {

using sched::Buf;
using sched::Kind;
using sched::On;

MPI_Comm comm_of(const sched::CommRef& c, const topo::Levels& lv) {
  switch (c.on) {
    case On::Step: return c.level < static_cast<int>(lv.step.size()) ? lv.step[c.level] : MPI_COMM_NULL;
    case On::Node: return lv.node;
    case On::Cross: return lv.cross;
    case On::Leaders: return lv.leaders;
    case On::None: break;
  }
  return MPI_COMM_NULL;
}

struct Runner {
  const topo::Levels& lv;
  const Binding& b;
  std::vector<int> counts, displs;  // int copies for the PMPI v-calls

  char* at(const sched::Ref& r) const {
    char* base = r.buf == Buf::Send ? const_cast<char*>(b.send) : r.buf == Buf::Recv ? b.recv : b.scratch;
    return base + r.off * b.stride;
  }
  void ints(const sched::Step& s) {
    counts.assign(s.counts.begin(), s.counts.end());
    displs.assign(s.displs.begin(), s.displs.end());
  }

  int step(const sched::Step& s) {
    const MPI_Datatype t = b.type;
    const int n = static_cast<int>(s.count);  // the planner keeps every count below INT_MAX
    if (s.kind == Kind::Copy) {
      if (b.info) return typed_copy(at(s.src), at(s.dst), s.count, *b.info);
      std::memcpy(at(s.dst), at(s.src), static_cast<size_t>(s.count));
      return MPI_SUCCESS;
    }
    if (s.kind == Kind::LoadBlock) return b.blocks->load(s.block, at(s.dst), s.count);
    if (s.kind == Kind::StoreBlock) return b.blocks->store(s.block, at(s.src), s.count);

    const MPI_Comm c = comm_of(s.comm, lv);
    if (c == MPI_COMM_NULL) return MPI_ERR_COMM;  // a builder bug: never silently skip a step
    int me = 0;
    PMPI_Comm_rank(c, &me);
    const void* src = s.in_place ? MPI_IN_PLACE : at(s.src);
    ints(s);
    switch (s.kind) {
      case Kind::ReduceScatter: {
        int64_t total = 0;
        for (int x : counts) total += x;
        if (b.tmp && b.info && total * b.info->size >= sched::thresholds().rs_direct_min)
          return reduce_scatter_direct(at(s.src), at(s.dst), counts, *b.info, b.op, c, *b.tmp);
        bool even = true;
        for (int x : counts) even &= x == counts[0];
        if (even) return PMPI_Reduce_scatter_block(at(s.src), at(s.dst), counts[0], t, b.op, c);
        return PMPI_Reduce_scatter(at(s.src), at(s.dst), counts.data(), t, b.op, c);
      }
      case Kind::Allreduce: return PMPI_Allreduce(src, at(s.dst), n, t, b.op, c);
      case Kind::Allgather: return PMPI_Allgather(src, n, t, at(s.dst), n, t, c);
      case Kind::Allgatherv: {
        int64_t total = 0;
        for (int x : counts) total += x;
        if (b.tmp && total * (b.info ? b.info->size : 1) >= sched::thresholds().agv_padded_min)
          return allgatherv_padded(s.in_place ? nullptr : at(s.src), s.in_place, at(s.dst), counts, displs, b.info, c,
                                   *b.tmp);
        return PMPI_Allgatherv(src, counts[me], t, at(s.dst), counts.data(), displs.data(), t, c);
      }
      case Kind::Bcast: return PMPI_Bcast(at(s.dst), n, t, s.root, c);
      case Kind::Scatterv:
        if (me == s.root)
          return PMPI_Scatterv(at(s.src), counts.data(), displs.data(), t, s.in_place ? MPI_IN_PLACE : at(s.dst),
                               counts[me], t, s.root, c);
        return PMPI_Scatterv(nullptr, nullptr, nullptr, t, at(s.dst), counts[me], t, s.root, c);
      case Kind::Gatherv:
        if (me == s.root)
          return PMPI_Gatherv(src, counts[me], t, at(s.dst), counts.data(), displs.data(), t, s.root, c);
        return PMPI_Gatherv(at(s.src), counts[me], t, nullptr, nullptr, nullptr, t, s.root, c);
      case Kind::Reduce:
        // The receive buffer matters at the root only; elsewhere it may alias the input.
        return PMPI_Reduce(src, me == s.root ? at(s.dst) : nullptr, n, t, b.op, s.root, c);
      case Kind::Alltoall: return PMPI_Alltoall(at(s.src), n, t, at(s.dst), n, t, c);
      case Kind::Barrier: return PMPI_Barrier(c);
      case Kind::Send: return PMPI_Send(at(s.src), n, t, s.root, 0, c);
      case Kind::Recv: return PMPI_Recv(at(s.dst), n, t, s.root, 0, c, MPI_STATUS_IGNORE);
      default: break;
    }
    return MPI_ERR_INTERN;
  }
};

}  // namespace

int run(const sched::Schedule& s, const topo::Levels& lv, const Binding& b) {
  Runner r{lv, b, {}, {}};
  for (const sched::Step& st : s.steps) {
    const int rc = r.step(st);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

}  // namespace hier::exec
