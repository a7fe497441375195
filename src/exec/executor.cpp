#include "exec/executor.hpp"

#include <climits>
#include <cstring>
#include <vector>

#include "exec/direct.hpp"
#include "exec/typed.hpp"
#include "util/inject.hpp"

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

}  // namespace

bool use_direct_rs(int64_t from, const TypeInfo* info, bool has_tmp, int64_t total) {
  return has_tmp && info && total * info->size >= from;
}
bool use_padded_agv(int64_t from, const TypeInfo* info, bool has_tmp, int64_t total) {
  return has_tmp && total * (info ? info->size : 1) >= from;
}

namespace {

int64_t sum(const std::vector<int64_t>& v) {
  int64_t t = 0;
  for (int64_t x : v) t += x;
  return t;
}

struct Runner {
  const sched::Schedule& sc;
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

  // Local steps (no communicator): run at once, in either mode.
  int local(const sched::Step& s) {
    if (s.kind == Kind::Copy) {
      if (b.info) return typed_copy(at(s.src), at(s.dst), s.count, *b.info);
      std::memcpy(at(s.dst), at(s.src), static_cast<size_t>(s.count));
      return MPI_SUCCESS;
    }
    if (s.kind == Kind::LoadBlock) return b.blocks->load(s.block, at(s.dst), s.count);
    return b.blocks->store(s.block, at(s.src), s.count);
  }
  static bool is_local(const sched::Step& s) {
    return s.kind == Kind::Copy || s.kind == Kind::LoadBlock || s.kind == Kind::StoreBlock;
  }
  bool direct_rs(int64_t total) const { return use_direct_rs(sc.direct_rs_from, b.info, b.tmp != nullptr, total); }
  bool padded_agv(int64_t total) const { return use_padded_agv(sc.padded_agv_from, b.info, b.tmp != nullptr, total); }

  // Starts a step nonblocking (a pipelined wave); `slot` numbers its scratch. The same choices
  // of implementation as step() makes, from inputs equal on every member.
  int start(const sched::Step& s, Pending& pd, size_t slot) {
    if (is_local(s)) return local(s);
    const MPI_Datatype t = b.type;
    const int n = static_cast<int>(s.count);
    const MPI_Comm c = comm_of(s.comm, lv);
    if (c == MPI_COMM_NULL) return MPI_ERR_COMM;
    int me = 0;
    PMPI_Comm_rank(c, &me);
    const void* src = s.in_place ? MPI_IN_PLACE : at(s.src);
    pd.counts.assign(s.counts.begin(), s.counts.end());
    pd.displs.assign(s.displs.begin(), s.displs.end());
    int64_t total = 0;
    for (int x : pd.counts) total += x;
    pd.reqs.assign(1, MPI_REQUEST_NULL);
    MPI_Request* r = &pd.reqs[0];
    int* cnt = pd.counts.data();
    int* dsp = pd.displs.data();
    switch (s.kind) {
      case Kind::ReduceScatter: {
        if (direct_rs(total))
          return reduce_scatter_direct_start(at(s.src), at(s.dst), pd.counts, *b.info, b.op, c, (*b.tmp)[slot], pd);
        bool even = true;
        for (int x : pd.counts) even &= x == cnt[0];
        if (even) return PMPI_Ireduce_scatter_block(at(s.src), at(s.dst), cnt[0], t, b.op, c, r);
        return PMPI_Ireduce_scatter(at(s.src), at(s.dst), cnt, t, b.op, c, r);
      }
      case Kind::Allreduce: return PMPI_Iallreduce(src, at(s.dst), n, t, b.op, c, r);
      case Kind::Allgather: return PMPI_Iallgather(src, n, t, at(s.dst), n, t, c, r);
      case Kind::Allgatherv:
        if (padded_agv(total)) {
          pd.reqs.clear();
          return allgatherv_padded_start(s.in_place ? nullptr : at(s.src), s.in_place, at(s.dst), pd.counts, pd.displs,
                                         b.info, c, (*b.tmp)[slot], pd);
        }
        return PMPI_Iallgatherv(src, cnt[me], t, at(s.dst), cnt, dsp, t, c, r);
      case Kind::Bcast: return PMPI_Ibcast(at(s.dst), n, t, s.root, c, r);
      case Kind::Scatterv:
        if (me == s.root)
          return PMPI_Iscatterv(at(s.src), cnt, dsp, t, s.in_place ? MPI_IN_PLACE : at(s.dst), cnt[me], t, s.root, c, r);
        return PMPI_Iscatterv(nullptr, nullptr, nullptr, t, at(s.dst), cnt[me], t, s.root, c, r);
      case Kind::Gatherv:
        if (me == s.root) return PMPI_Igatherv(src, cnt[me], t, at(s.dst), cnt, dsp, t, s.root, c, r);
        return PMPI_Igatherv(at(s.src), cnt[me], t, nullptr, nullptr, nullptr, t, s.root, c, r);
      case Kind::Reduce: return PMPI_Ireduce(src, me == s.root ? at(s.dst) : nullptr, n, t, b.op, s.root, c, r);
      case Kind::Alltoall: return PMPI_Ialltoall(at(s.src), n, t, at(s.dst), n, t, c, r);
      case Kind::Barrier: return PMPI_Ibarrier(c, r);
      case Kind::Send: return PMPI_Isend(at(s.src), n, t, s.root, 0, c, r);
      case Kind::Recv: return PMPI_Irecv(at(s.dst), n, t, s.root, 0, c, r);
      default: break;
    }
    return MPI_ERR_INTERN;
  }

  int step(const sched::Step& s) {
    const MPI_Datatype t = b.type;
    const int n = static_cast<int>(s.count);  // the planner keeps every count below INT_MAX
    if (is_local(s)) return local(s);

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
        if (direct_rs(total))
          return reduce_scatter_direct(at(s.src), at(s.dst), counts, *b.info, b.op, c, (*b.tmp)[0]);
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
        if (padded_agv(total))
          return allgatherv_padded(s.in_place ? nullptr : at(s.src), s.in_place, at(s.dst), counts, displs, b.info, c,
                                   (*b.tmp)[0]);
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

bool reserve(const sched::Schedule& s, const topo::Levels& lv, const TypeInfo* info, ScratchSet* tmp) {
  if (!tmp) return true;
  const size_t n = s.steps.size();
  for (size_t i = 0; i < n;) {
    // A step alone uses slot 0; the steps of a wave use their index in the wave (see run()).
    size_t j = i + 1;
    if (s.steps[i].wave >= 0)
      while (j < n && s.steps[j].wave == s.steps[i].wave) ++j;
    for (size_t k = i; k < j; ++k) {
      const sched::Step& st = s.steps[k];
      if (st.kind != Kind::ReduceScatter && st.kind != Kind::Allgatherv) continue;
      const int64_t total = sum(st.counts);
      const std::vector<int> counts(st.counts.begin(), st.counts.end());
      int64_t bytes = -1;
      if (st.kind == Kind::ReduceScatter && use_direct_rs(s.direct_rs_from, info, true, total)) {
        int me = 0;
        const MPI_Comm c = comm_of(st.comm, lv);
        if (c == MPI_COMM_NULL || PMPI_Comm_rank(c, &me) != MPI_SUCCESS) return false;
        bytes = reduce_scatter_direct_bytes(counts, me, *info);
      } else if (st.kind == Kind::Allgatherv && use_padded_agv(s.padded_agv_from, info, true, total)) {
        bytes = allgatherv_padded_bytes(counts, info);
      }
      if (bytes >= 0 && !(*tmp)[k - i].get(static_cast<size_t>(bytes))) return false;
    }
    i = j;
  }
  return true;
}

int run(const sched::Schedule& s, const topo::Levels& lv, const Binding& b) {
  if (util::injected_failure("run")) return MPI_ERR_OTHER;  // tests: an error inside a schedule
  Runner r{s, lv, b, {}, {}};
  const size_t n = s.steps.size();
  std::vector<Pending> wave;
  for (size_t i = 0; i < n;) {
    if (s.steps[i].wave < 0) {
      const int rc = r.step(s.steps[i++]);
      if (rc != MPI_SUCCESS) return rc;
      continue;
    }
    size_t j = i;
    while (j < n && s.steps[j].wave == s.steps[i].wave) ++j;
    wave.clear();
    wave.resize(j - i);
    int rc = MPI_SUCCESS;
    size_t started = 0;
    for (; i + started < j && rc == MPI_SUCCESS; ++started) rc = r.start(s.steps[i + started], wave[started], started);
    for (size_t k = 0; k < started; ++k) {
      const int rc_k = wave[k].complete();
      if (rc == MPI_SUCCESS) rc = rc_k;
    }
    if (rc != MPI_SUCCESS) return rc;
    i = j;
  }
  return MPI_SUCCESS;
}

}  // namespace hier::exec
