#include "exec/executor.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include <cmath>

#include "config/config.hpp"
#include "exec/device_stage.hpp"
#include "exec/direct.hpp"
#include "exec/shm_steps.hpp"
#include "exec/typed.hpp"
#include "model/cost.hpp"
#include "model/load.hpp"
#include "quant/quant.hpp"
#include "shm/wait.hpp"
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

MPI_Comm level_comm(const sched::CommRef& c, const topo::Levels& lv) { return comm_of(c, lv); }

int route_shm(sched::Schedule& s, const topo::Levels& lv, int64_t elem_size) {
  model::route_inside_nodes(s, lv.shape, lv.rank, model::process().model, std::max<int64_t>(elem_size, 1),
                            config::get().shm_cma);
  return static_cast<int>(std::count_if(s.steps.begin(), s.steps.end(),
                                        [](const sched::Step& st) { return st.via == sched::Via::Shm; }));
}

Machine::Machine(const sched::Schedule& s, const topo::Levels& lv, const Binding& b, bool nonblocking)
    : s_(s), lv_(lv), b_(b), nonblocking_(nonblocking) {}

char* Machine::at(const sched::Ref& r) const {
  if (r.buf == Buf::Records) return b_.records + r.off;  // bytes
  char* base = r.buf == Buf::Send ? const_cast<char*>(b_.send) : r.buf == Buf::Recv ? b_.recv : b_.scratch;
  return base + r.off * b_.stride;
}

namespace {
bool is_local(const sched::Step& s) {
  return s.kind == Kind::Copy || s.kind == Kind::LoadBlock || s.kind == Kind::StoreBlock || s.kind == Kind::Quantize ||
         s.kind == Kind::Dequantize || s.kind == Kind::DequantizeReduce;
}

// The quantization steps, on values of T (sched/ir.hpp). They never allocate and never
// communicate; every rank runs the same kernel on the same records, so dequantized values are
// the same bits everywhere.
template <class T>
int quant_local(const sched::Step& s, const sched::Schedule& sc, char* src, char* dst, char* residual) {
  const int64_t n = s.count, B = sc.quant_block;
  const int bits = sc.quant_bits;
  if (n <= 0) return MPI_SUCCESS;
  switch (s.kind) {
    case Kind::Quantize: {
      // Error feedback: x += r first, then r = x - deq(q(x)), the error this call made, carried
      // into the next (a non-finite difference, from a block sent as NaN, is dropped: it must
      // not poison later calls). src is libhier's scratch, never the user's buffer.
      T* x = reinterpret_cast<T*>(src);
      T* r = s.residual >= 0 && residual ? reinterpret_cast<T*>(residual) + s.residual : nullptr;
      // (16-bit values: GCC computes each + and - in float and rounds it to 16 bits.)
      if (r)
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] + r[i];
      quant::quantize(x, n, B, bits, dst);
      if (!r) return MPI_SUCCESS;
      quant::dequantize(dst, n, B, bits, r);
      for (int64_t i = 0; i < n; ++i) {
        r[i] = x[i] - r[i];  // stored: rounded to T before the test (16 bits: not kept in float)
        if (!std::isfinite(static_cast<double>(r[i]))) r[i] = T(0);
      }
      return MPI_SUCCESS;
    }
    case Kind::Dequantize: quant::dequantize(src, n, B, bits, reinterpret_cast<T*>(dst)); return MPI_SUCCESS;
    case Kind::DequantizeReduce: {
      T* acc = reinterpret_cast<T*>(dst);
      if constexpr (sizeof(T) == 2) {  // 16-bit floats: summed in float, rounded to 16 bits once
        quant::dequantize_sum(src, s.part_bytes, s.parts, n, B, bits, acc);
      } else {
        std::memset(static_cast<void*>(acc), 0, static_cast<size_t>(n) * sizeof(T));
        for (int k = 0; k < s.parts; ++k) quant::dequantize_add(src + k * s.part_bytes, n, B, bits, acc);
      }
      return MPI_SUCCESS;
    }
    default: break;
  }
  return MPI_ERR_INTERN;
}
}  // namespace

// Local steps on device buffers: queued on the module's stream (flush() waits for them). Only
// dense types are bound on the device (the dispatch stages others), so a copy is bytes.
int Machine::device_local(const sched::Step& s) {
  queued_ = true;
  const int64_t unit = b_.info ? b_.info->size : b_.stride;
  if (b_.info && !b_.info->dense) return MPI_ERR_TYPE;
  if (s.kind == Kind::Copy) return b_.dev->copy(at(s.dst), at(s.src), s.count * unit);
  if (s.kind == Kind::LoadBlock) return b_.blocks->load(s.block, at(s.dst), s.count * b_.stride);
  if (s.kind == Kind::StoreBlock) return b_.blocks->store(s.block, at(s.src), s.count * b_.stride);
  return device_quant(s);
}

// The quantization steps on device buffers, as the module's kernels: the same bits as
// quant_local above. Quantize with error feedback: x += r with the call site's residual (in
// device memory on a device binding, kept across calls: exec/quant_call.cpp), the records, then
// r = x - deq(records) in place; flush() waits for all of it before the records cross.
// 16-bit values (MPIX_C_FLOAT16): the same kernels, and their DequantizeReduce as
// dequantize_sum (summed in float, rounded once).
// DequantizeReduce: the first part dequantized, the others added in order (the host adds the
// first onto zeros: the same bits, since no dequantized value is -0).
int Machine::device_quant(const sched::Step& s) {
  const int64_t n = s.count, B = s_.quant_block, esz = b_.info->size;
  const int bits = s_.quant_bits;
  const DeviceOps& d = *b_.dev;
  if (n <= 0) return MPI_SUCCESS;
  switch (s.kind) {
    case Kind::Quantize: {
      char* x = at(s.src);
      char* r = s.residual >= 0 && b_.residual ? b_.residual + s.residual * esz : nullptr;
      int rc = r ? d.add(b_.type, r, x, n) : MPI_SUCCESS;
      if (rc == MPI_SUCCESS) rc = d.quantize(bits, b_.type, x, n, B, at(s.dst));
      if (r && rc == MPI_SUCCESS) rc = d.feedback(bits, b_.type, at(s.dst), x, n, B, r);
      return rc;
    }
    case Kind::Dequantize: return d.dequantize(bits, b_.type, at(s.src), n, B, at(s.dst), false);
    case Kind::DequantizeReduce: {
      if (s.parts < 1) return MPI_ERR_INTERN;
      if (esz == 2)  // 16-bit values: summed in float, rounded once (as quant_local)
        return d.dequantize_sum(bits, b_.type, at(s.src), s.part_bytes, s.parts, n, B, at(s.dst));
      int rc = MPI_SUCCESS;
      for (int k = 0; k < s.parts && rc == MPI_SUCCESS; ++k)
        rc = d.dequantize(bits, b_.type, at(s.src) + k * s.part_bytes, n, B, at(s.dst), k > 0);
      return rc;
    }
    default: break;
  }
  return MPI_ERR_INTERN;
}

int Machine::flush() {
  if (!queued_) return MPI_SUCCESS;
  queued_ = false;
  return b_.dev->sync();
}

// Local steps (no communicator): run at once, in either mode.
int Machine::local(const sched::Step& s) {
  if (b_.dev && (on_device(s.src) || on_device(s.dst) || s.kind == Kind::LoadBlock || s.kind == Kind::StoreBlock))
    return device_local(s);
  if (s.kind == Kind::Copy) {
    if (b_.info) return typed_copy(at(s.src), at(s.dst), s.count, *b_.info);
    std::memcpy(at(s.dst), at(s.src), static_cast<size_t>(s.count));
    return MPI_SUCCESS;
  }
  // The user's blocks take bytes: count units of `stride` bytes (1 in byte schedules).
  if (s.kind == Kind::LoadBlock) return b_.blocks->load(s.block, at(s.dst), s.count * b_.stride);
  if (s.kind == Kind::StoreBlock) return b_.blocks->store(s.block, at(s.src), s.count * b_.stride);
  if (b_.type == MPI_FLOAT) return quant_local<float>(s, s_, at(s.src), at(s.dst), b_.residual);
  if (b_.type == MPI_DOUBLE) return quant_local<double>(s, s_, at(s.src), at(s.dst), b_.residual);
#if defined(MPIX_C_FLOAT16) && HIER_QUANT_F16
  if (b_.type == MPIX_C_FLOAT16) return quant_local<quant::f16>(s, s_, at(s.src), at(s.dst), b_.residual);
#endif
  return MPI_ERR_TYPE;  // quantized schedules run on float / double (and MPIX_C_FLOAT16) values only
}

// The one step switch. pd null: the blocking PMPI call, complete on return; otherwise the step
// is started nonblocking into *pd (completed by Pending::complete / test). `slot` numbers its
// scratch (its index in its group). Both forms make the same choices of implementation, from
// inputs equal on every member.
int Machine::issue(const sched::Step& s, Pending* pd, size_t slot) {
  // Device buffers: the local work of libhier's own exchanges as kernels too.
  const DeviceOps* dev = b_.dev && (on_device(s.src) || on_device(s.dst)) ? b_.dev : nullptr;
  if (is_local(s)) {
    via_ = dev || (b_.dev && (s.kind == Kind::LoadBlock || s.kind == Kind::StoreBlock)) ? diag::trace::Transport::DeviceLocal
                                                                                        : diag::trace::Transport::Local;
    return local(s);
  }
  // An MPI that is not GPU-aware: the step's event stands for the queued kernels it reads.
  if (dev && b_.stage) return issue_staged(s, pd, slot);
  // A message step may read what queued kernels write (and must not overwrite what they read).
  // A step of a wave needs only the kernels of the earlier waves, flushed when its group started
  // (start_group): the wave's own local steps, queued before it in the group (an older chunk's
  // dequantize, say), touch other chunks' memory, and run on the device while it crosses.
  if (s.wave < 0 || !pd)
    if (const int rc = flush(); rc != MPI_SUCCESS) return rc;
  return issue_at(s, pd, at(s.src), at(s.dst), dev, b_.tmp ? &(*b_.tmp)[slot] : nullptr);
}

// A message step of a device binding on host copies (exec/device_stage.hpp): what it reads is
// copied to the step's staging slot first (queued by stage_wave for a whole wave, before any of
// its steps is issued), and the step waits for its own copies only; what it writes goes back
// when it completes (here for a blocking step, in complete_group for a started one), so that in
// a wave the copies of one step overlap the messages of the others. libhier's own exchanges then
// run on host memory.
int Machine::stage_step(const sched::Step& s, size_t slot) {
  if (staged_in_.size() <= slot) staged_in_.resize(slot + 1);
  StagedIn& in = staged_in_[slot];
  if (!stage_view(s, comm_of(s.comm, lv_), b_.stride, in.v)) return MPI_ERR_COMM;
  char* host = (*b_.stage)[slot].get(static_cast<size_t>(stage_layout(s, in.v).bytes()));  // reserved at the miss
  if (!host) return MPI_ERR_NO_MEM;
  const int rc = stage_in(s, in.v, *b_.dev, at(s.src), on_device(s.src), at(s.dst), on_device(s.dst), host,
                          &in.host_src, &in.host_dst, &in.ready);
  // A failed copy (no event taken) is not queued: issuing the step copies again and reports it,
  // where stage_wave (which has no code to return) would have let the MPI read a partial copy.
  in.queued = rc == MPI_SUCCESS;
  return rc;
}

// The copies in of a wave's staged steps [first, end), all queued before the first is issued.
void Machine::stage_wave(size_t first, size_t end) {
  for (size_t k = first; k < end; ++k) {
    const sched::Step& st = s_.steps[k];
    if (!is_local(st) && (on_device(st.src) || on_device(st.dst)) && stage_step(st, k - first) != MPI_SUCCESS) return;
  }
}

// A wave's issue that stopped at an error (a step's MPI call or its copies failed) leaves the
// later steps' copies queued by stage_wave, each holding an event: they are waited for (the
// staging memory may serve another request next) and their events go back to the pool.
Machine::~Machine() {
  for (StagedIn& in : staged_in_)
    if (in.queued && b_.dev) stage_wait(*b_.dev, in.ready);
}

int Machine::issue_staged(const sched::Step& s, Pending* pd, size_t slot) {
  if (slot >= staged_in_.size() || !staged_in_[slot].queued)
    if (const int rc = stage_step(s, slot); rc != MPI_SUCCESS) return rc;
  StagedIn in = staged_in_[slot];
  staged_in_[slot] = StagedIn{};
  if (const int rc = stage_wait(*b_.dev, in.ready); rc != MPI_SUCCESS) return rc;
  const int rc = issue_at(s, pd, in.host_src, in.host_dst, nullptr, b_.stage_tmp ? &(*b_.stage_tmp)[slot] : nullptr);
  via_ = diag::trace::Transport::Staged;
  StagedOut o{on_device(s.dst) ? &s : nullptr, at(s.dst), in.host_dst, in.v};
  if (!pd) return rc == MPI_SUCCESS ? stage_back(o) : rc;
  if (staged_.size() <= slot) staged_.resize(slot + 1);
  staged_[slot] = o;
  return rc;
}

int Machine::stage_back(StagedOut& o) {
  if (!o.s) return MPI_SUCCESS;
  queued_ = true;  // flush() waits for the copies before the next message step reuses the slot
  const int rc = stage_out(*o.s, o.v, *b_.dev, o.host_dst, o.dst);
  o.s = nullptr;
  return rc;
}

// The message step s on src / dst (the binding's buffers, or their staged host copies).
// sched::for_each_piece (sched/pieces.hpp) walks, as bytes, what each kind passes the MPI here:
// device staging copies those pieces and the model prices them, so a change here goes there too.
int Machine::issue_at(const sched::Step& s, Pending* pd, char* src_at, char* dst_at, const DeviceOps* dev,
                      Scratch* tmp) {
  // Steps on records move bytes: MPI_BYTE, and no element type for the direct / padded forms.
  const MPI_Datatype t = s.bytes ? MPI_BYTE : b_.type;
  const TypeInfo* info = s.bytes ? nullptr : b_.info;
  const MPI_Op op = b_.op;
  const int n = static_cast<int>(s.count);  // the planner keeps every count below INT_MAX
  const MPI_Comm c = comm_of(s.comm, lv_);
  if (c == MPI_COMM_NULL) return MPI_ERR_COMM;  // a builder bug: never silently skip a step
  int me = 0;
  PMPI_Comm_rank(c, &me);
  const void* src = s.in_place ? MPI_IN_PLACE : src_at;
  // Count arrays that MPI reads until the step completes: the Pending's, or ours (blocking).
  std::vector<int>& counts = pd ? pd->counts : counts_;
  std::vector<int>& displs = pd ? pd->displs : displs_;
  counts.assign(s.counts.begin(), s.counts.end());
  displs.assign(s.displs.begin(), s.displs.end());
  MPI_Request* r = nullptr;
  if (pd) {
    pd->reqs.assign(1, MPI_REQUEST_NULL);
    r = &pd->reqs[0];
  }
  int* cnt = counts.data();
  int* dsp = displs.data();
  via_ = dev ? diag::trace::Transport::DeviceMessages : diag::trace::Transport::Messages;
  // Through the communicator's shared segment, in the form the plan chose (exec/shm_steps.hpp).
  // Where it cannot (no segment on this communicator, the transport declines these inputs: the
  // same on every member), the step runs as messages, counted in the report.
  if (s.via == sched::Via::Shm && !dev) {  // (never so marked in a device_hier context)
    shm::Segment* seg = lv_.segment(c);
    std::unique_ptr<shm::Step> st;
    if (seg) {
      ShmArgs a{s.in_place ? nullptr : src_at, dst_at, s.in_place, s.count, s.root, s.counts, s.displs, info, op, s.single};
      st = shm_start(s.kind, *seg, a);
    }
    if (st) {
      via_ = shm_single_copy(*st) ? diag::trace::Transport::ShmSingleCopy : diag::trace::Transport::ShmCopyIn;
      if (!pd) return shm::finish(*st);
      pd->reqs.clear();
      pd->shm = std::move(st);
      shm::advance(*pd->shm);  // its first round, where the peers allow
      return MPI_SUCCESS;
    }
    note_shm_fallback(seg ? ShmFallback::Declined : ShmFallback::NoSegment);
  }
  switch (s.kind) {
    case Kind::ReduceScatter: {
      // (libhier's own exchange as sched::direct_reduce_scatter decided; a run without buffers
      // for it, which no call of libhier makes, would take the MPI's collective)
      if (tmp && sched::direct_reduce_scatter(s, info ? info->size : 0, s_.direct_rs_from)) {
        via_ = diag::trace::Transport::Direct;
        return pd ? reduce_scatter_direct_start(src_at, dst_at, counts, *info, op, c, *tmp, *pd, dev)
                  : reduce_scatter_direct(src_at, dst_at, counts, *info, op, c, *tmp, dev);
      }
      bool even = true;
      for (int x : counts) even &= x == cnt[0];
      if (even)
        return pd ? PMPI_Ireduce_scatter_block(src_at, dst_at, cnt[0], t, op, c, r)
                  : PMPI_Reduce_scatter_block(src_at, dst_at, cnt[0], t, op, c);
      return pd ? PMPI_Ireduce_scatter(src_at, dst_at, cnt, t, op, c, r)
                : PMPI_Reduce_scatter(src_at, dst_at, cnt, t, op, c);
    }
    case Kind::Allreduce:
      return pd ? PMPI_Iallreduce(src, dst_at, n, t, op, c, r) : PMPI_Allreduce(src, dst_at, n, t, op, c);
    case Kind::Allgather:
      return pd ? PMPI_Iallgather(src, n, t, dst_at, n, t, c, r) : PMPI_Allgather(src, n, t, dst_at, n, t, c);
    case Kind::Allgatherv:
      if (tmp && sched::padded_allgatherv(s, info ? info->size : 0, s_.padded_agv_from)) {
        const char* mine = s.in_place ? nullptr : src_at;
        via_ = diag::trace::Transport::Direct;
        if (!pd) return allgatherv_padded(mine, s.in_place, dst_at, counts, displs, info, c, *tmp, dev);
        pd->reqs.clear();
        return allgatherv_padded_start(mine, s.in_place, dst_at, counts, displs, info, c, *tmp, *pd, dev);
      }
      return pd ? PMPI_Iallgatherv(src, cnt[me], t, dst_at, cnt, dsp, t, c, r)
                : PMPI_Allgatherv(src, cnt[me], t, dst_at, cnt, dsp, t, c);
    case Kind::Bcast: return pd ? PMPI_Ibcast(dst_at, n, t, s.root, c, r) : PMPI_Bcast(dst_at, n, t, s.root, c);
    case Kind::Scatterv:
      if (me == s.root) {
        void* dst = s.in_place ? MPI_IN_PLACE : dst_at;
        return pd ? PMPI_Iscatterv(src_at, cnt, dsp, t, dst, cnt[me], t, s.root, c, r)
                  : PMPI_Scatterv(src_at, cnt, dsp, t, dst, cnt[me], t, s.root, c);
      }
      return pd ? PMPI_Iscatterv(nullptr, nullptr, nullptr, t, dst_at, cnt[me], t, s.root, c, r)
                : PMPI_Scatterv(nullptr, nullptr, nullptr, t, dst_at, cnt[me], t, s.root, c);
    case Kind::Gatherv:
      if (me == s.root)
        return pd ? PMPI_Igatherv(src, cnt[me], t, dst_at, cnt, dsp, t, s.root, c, r)
                  : PMPI_Gatherv(src, cnt[me], t, dst_at, cnt, dsp, t, s.root, c);
      return pd ? PMPI_Igatherv(src_at, cnt[me], t, nullptr, nullptr, nullptr, t, s.root, c, r)
                : PMPI_Gatherv(src_at, cnt[me], t, nullptr, nullptr, nullptr, t, s.root, c);
    case Kind::Reduce: {
      // The receive buffer matters at the root only; elsewhere it may alias the input.
      void* dst = me == s.root ? dst_at : nullptr;
      return pd ? PMPI_Ireduce(src, dst, n, t, op, s.root, c, r) : PMPI_Reduce(src, dst, n, t, op, s.root, c);
    }
    case Kind::Alltoall:
      return pd ? PMPI_Ialltoall(src_at, n, t, dst_at, n, t, c, r)
                : PMPI_Alltoall(src_at, n, t, dst_at, n, t, c);
    case Kind::Alltoallv: {
      std::vector<int>& rcounts = pd ? pd->rcounts : rcounts_;
      std::vector<int>& rdispls = pd ? pd->rdispls : rdispls_;
      rcounts.assign(s.rcounts.begin(), s.rcounts.end());
      rdispls.assign(s.rdispls.begin(), s.rdispls.end());
      return pd ? PMPI_Ialltoallv(src_at, cnt, dsp, t, dst_at, rcounts.data(), rdispls.data(), t, c, r)
                : PMPI_Alltoallv(src_at, cnt, dsp, t, dst_at, rcounts.data(), rdispls.data(), t, c);
    }
    case Kind::Barrier: return pd ? PMPI_Ibarrier(c, r) : PMPI_Barrier(c);
    case Kind::Send: return pd ? PMPI_Isend(src_at, n, t, s.root, 0, c, r) : PMPI_Send(src_at, n, t, s.root, 0, c);
    case Kind::Recv:
      return pd ? PMPI_Irecv(dst_at, n, t, s.root, 0, c, r)
                : PMPI_Recv(dst_at, n, t, s.root, 0, c, MPI_STATUS_IGNORE);
    default: break;
  }
  return MPI_ERR_INTERN;
}

void Machine::start_group() {
  if (in_flight_ || done()) return;
  ++groups_;
  const size_t i = next_;
  if (s_.steps[i].wave < 0 && (!nonblocking_ || is_local(s_.steps[i]))) {
    if (__builtin_expect(trace_id_ != 0, 0)) {
      Traced t;
      const uint64_t k0 = diag::trace::tl_kernel_ns;
      t.t0 = diag::trace::now_ns();
      rc_ = issue(s_.steps[i], nullptr, 0);  // blocking: complete on return
      t.t1 = diag::trace::now_ns();
      t.kernel = diag::trace::tl_kernel_ns - k0;
      t.via = via_;
      trace_step(s_.steps[i], t);
    } else {
      rc_ = issue(s_.steps[i], nullptr, 0);  // blocking: complete on return
    }
    next_ = i + 1;
    return;
  }
  const size_t j = sched::group_end(s_, i);
  if (pending_.size() < j - i) pending_.resize(j - i);
  for (StagedOut& o : staged_) o.s = nullptr;
  started_ = 0;
  first_ = i;
  // The kernels of the earlier waves, before any message step of this one reads their output
  // (issue() then waits for nothing inside the wave). Staged steps wait for their own copies'
  // events instead, queued behind those kernels.
  // (A wave of local steps only waits for nothing: its kernels queue behind the earlier ones.)
  // (Host buffers never scan the wave.)
  const bool flush_first = s_.steps[i].wave >= 0 && b_.dev && !b_.stage &&
                           std::any_of(s_.steps.begin() + i, s_.steps.begin() + j,
                                       [](const sched::Step& st) { return !is_local(st); });
  int rc = flush_first ? flush() : MPI_SUCCESS;
  if (rc != MPI_SUCCESS) {
    rc_ = rc;
    next_ = j;
    return;
  }
  if (b_.stage && b_.dev) stage_wave(i, j);
  if (__builtin_expect(trace_id_ != 0, 0)) {
    traced_.assign(j - i, Traced{});
    for (; i + started_ < j && rc == MPI_SUCCESS; ++started_) {
      Traced& t = traced_[started_];
      const sched::Step& st = s_.steps[i + started_];
      const uint64_t k0 = diag::trace::tl_kernel_ns;
      t.t0 = diag::trace::now_ns();
      rc = issue(st, &pending_[started_], started_);
      t.via = via_;
      if (is_local(st)) t.t1 = diag::trace::now_ns();
      t.kernel = diag::trace::tl_kernel_ns - k0;
    }
  } else {
    for (; i + started_ < j && rc == MPI_SUCCESS; ++started_) rc = issue(s_.steps[i + started_], &pending_[started_], started_);
  }
  rc_ = rc;
  next_ = j;
  in_flight_ = true;
}

namespace {
// Whether every step of a group is complete, testing each once (shared-memory steps advance as
// far as their peers allow; a step's finish, as the direct exchanges', runs later in
// Pending::complete). Every step is tested on every pass, also after an incomplete one: a
// pipelined wave's shared-memory reduce-scatter of one chunk must advance while the messages
// of an older chunk cross the link, and those messages progress only while tested (stopping at
// the first incomplete step ran the wave's steps one after the other). An error counts as
// complete: Pending::complete reports it.
// `tr` (HIER_TRACE; null: off): per step, the kernel time seen while advancing it and the time
// it was first seen complete.
template <class Traced>
bool group_complete(std::vector<Pending>& pending, size_t n, Traced* tr) {
  bool all = true;
  for (size_t k = 0; k < n; ++k) {
    Pending& pd = pending[k];
    bool done = true;
    if (pd.shm) {
      const uint64_t k0 = tr ? diag::trace::tl_kernel_ns : 0;
      done = shm::advance(*pd.shm);
      if (tr) tr[k].kernel += diag::trace::tl_kernel_ns - k0;
    } else if (!pd.reqs.empty()) {
      int flag = 0;
      if (PMPI_Testall(static_cast<int>(pd.reqs.size()), pd.reqs.data(), &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        continue;
      done = flag != 0;
    }
    if (tr && done && tr[k].t1 == 0) tr[k].t1 = diag::trace::now_ns();
    all &= done;
  }
  return all;
}
}  // namespace

bool Machine::complete_group(bool block) {
  if (!in_flight_) return true;
  bool has_shm = false;
  for (size_t k = 0; k < started_; ++k) has_shm |= pending_[k].shm != nullptr;
  Traced* tr = trace_id_ && traced_.size() >= started_ ? traced_.data() : nullptr;
  if (block && has_shm) {
    // Shared-memory steps beside messages (a pipelined wave): both advance in turn, so that
    // neither waits for the other to finish first.
    shm::wait_until([&] { return group_complete(pending_, started_, tr); });
  } else if (!block && !group_complete(pending_, started_, tr)) {
    return false;
  }
  for (size_t k = 0; k < started_; ++k) {
    const uint64_t k0 = tr ? diag::trace::tl_kernel_ns : 0;
    int rc_k = pending_[k].complete();
    if (tr) {  // a direct exchange reduces here; a blocking wave without segment steps waits here
      tr[k].kernel += diag::trace::tl_kernel_ns - k0;
      if (tr[k].t1 == 0) tr[k].t1 = diag::trace::now_ns();
      trace_step(s_.steps[first_ + k], tr[k]);
    }
    // A staged step's results back to the device, queued while the later steps still run.
    if (k < staged_.size() && staged_[k].s) {
      if (rc_k == MPI_SUCCESS) rc_k = stage_back(staged_[k]);
      staged_[k].s = nullptr;
    }
    if (rc_ == MPI_SUCCESS) rc_ = rc_k;
  }
  started_ = 0;
  in_flight_ = false;
  return true;
}

// One step's slice (HIER_TRACE): what it moved, where, how, and the kernel time inside it.
void Machine::trace_step(const sched::Step& st, const Traced& t) {
  static const char* const kLevels[] = {"level0", "level1", "level2", "level3", "level4", "level5", "level6", "level7"};
  diag::trace::StepInfo i;
  i.kind = sched::to_string(st.kind);
  i.via = t.via;
  switch (st.comm.on) {
    case On::Node: i.level = "node"; break;
    case On::Cross: i.level = "cross"; break;
    case On::Leaders: i.level = "leaders"; break;
    case On::Step: {  // step[j]: inside level j's groups (its name), the last across the nodes
      const int j = st.comm.level;
      const auto& names = lv_.shape.names;
      i.level = j == static_cast<int>(names.size()) ? "cross" : j >= 0 && j < 8 ? kLevels[j] : "level";
      for (const char* known : {"node", "socket", "numa", "gpu", "gcd", "l3", "rack", "switch"})
        if (j >= 0 && j < static_cast<int>(names.size()) && names[j] == known) i.level = known;
      break;
    }
    case On::None: break;
  }
  const MPI_Comm c = comm_of(st.comm, lv_);
  if (c != MPI_COMM_NULL) PMPI_Comm_size(c, &i.group);
  if (st.kind == Kind::Bcast || st.kind == Kind::Scatterv || st.kind == Kind::Gatherv || st.kind == Kind::Reduce ||
      st.kind == Kind::Send || st.kind == Kind::Recv)
    i.peer = st.root;
  int64_t units = st.count;
  if (st.kind == Kind::ReduceScatter || st.kind == Kind::Allgatherv || st.kind == Kind::Scatterv ||
      st.kind == Kind::Gatherv || st.kind == Kind::Alltoallv) {
    units = 0;
    for (int64_t x : st.counts) units += x;
  }
  i.bytes = units * (st.bytes ? 1 : b_.info ? b_.info->size : b_.stride);  // records: bytes; else units
  i.wave = st.wave;
  i.chunk = st.stage;
  // Local steps are their kernels (copies: packing); level steps carry the reductions run inside.
  if (is_local(st)) i.kernel_ns = static_cast<int64_t>(t.t1 - t.t0);
  else if (t.kernel) i.kernel_ns = static_cast<int64_t>(t.kernel);
  if (trace_async_) diag::trace::async_step(trace_id_, i, t.t0, t.t1);
  else diag::trace::step(trace_id_, i, t.t0, t.t1);
}

bool reserve(const sched::Schedule& s, const topo::Levels& lv, const TypeInfo* info, ScratchSet* tmp) {
  if (!tmp) return true;
  const size_t n = s.steps.size();
  for (size_t i = 0; i < n;) {
    const size_t j = sched::group_end(s, i);  // step k of the group takes slot k - i (Machine::issue)
    for (size_t k = i; k < j; ++k) {
      const sched::Step& st = s.steps[k];
      if (st.kind != Kind::ReduceScatter && st.kind != Kind::Allgatherv) continue;
      const TypeInfo* sinfo = st.bytes ? nullptr : info;  // steps on records: bytes
      const std::vector<int> counts(st.counts.begin(), st.counts.end());
      int64_t bytes = -1;
      if (sched::direct_reduce_scatter(st, sinfo ? sinfo->size : 0, s.direct_rs_from)) {
        int me = 0;
        const MPI_Comm c = comm_of(st.comm, lv);
        if (c == MPI_COMM_NULL || PMPI_Comm_rank(c, &me) != MPI_SUCCESS) return false;
        bytes = reduce_scatter_direct_bytes(counts, me, *sinfo);
      } else if (sched::padded_allgatherv(st, sinfo ? sinfo->size : 0, s.padded_agv_from)) {
        bytes = allgatherv_padded_bytes(counts, sinfo);
      }
      if (bytes >= 0 && !(*tmp)[k - i].get(static_cast<size_t>(bytes))) return false;
    }
    i = j;
  }
  return true;
}

int run(const sched::Schedule& s, const topo::Levels& lv, const Binding& b) {
  if (util::injected_failure("run")) return MPI_ERR_OTHER;  // tests: an error inside a schedule
  Machine m(s, lv, b, false);
  if (diag::trace::g_on) m.trace_as(diag::trace::note_run(s.name.c_str()), false);
  while (!m.done()) {
    m.start_group();
    m.complete_group(true);
  }
  const int rc_flush = m.flush();  // the last local steps' kernels, before the caller reads
  if (m.rc() != MPI_SUCCESS && b.dev) {
    // A step failed: copies and kernels queued before it (a wave's staging copies, whose events
    // nobody waits for now) may still read or write the scratch and staging memory the caller
    // gives back next. Everything queued ends first (its own error, if any, adds nothing).
    (void)b.dev->sync();
  }
  return m.rc() != MPI_SUCCESS ? m.rc() : rc_flush;
}

}  // namespace hier::exec
