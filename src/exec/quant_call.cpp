#include "exec/quant_call.hpp"

#include <cstring>
#include <vector>

#include "device/module.hpp"
#include "exec/direct.hpp"
#include "exec/request.hpp"
#include "quant/feedback.hpp"
#include "quant/quant.hpp"
#include "quant/stats.hpp"

namespace hier::exec {

using config::Coll;

int64_t kb() { return config::get().quant_block; }

namespace {

int64_t align64(int64_t b) { return (b + 63) / 64 * 64; }

// The memory of a quantized schedule on values of `t`, in one buffer: its values (scratch), its
// records, then `check` bytes for the check's copies. Reserved at the schedule-cache miss in the
// context's scratch (blocking calls run there); a request takes the same layout on memory of its
// own (exec::request_scratch), or on the context's when that allocation fails.
int64_t records_at(const sched::Schedule& s, const TypeInfo& t) { return align64(s.scratch * t.size); }
int64_t check_at(const sched::Schedule& s, const TypeInfo& t) { return align64(records_at(s, t) + s.records); }
int64_t memory_bytes(const sched::Schedule& s, const TypeInfo& t, int64_t check) { return check_at(s, t) + check; }
// On a device binding (exec/device_steps.hpp), the same values and records in device memory;
// the check's copies stay host memory (the host scratch, reserved at the miss either way).
int64_t device_bytes(const sched::Schedule& s, const TypeInfo& t) { return check_at(s, t); }

// The error feedback's residual of a call bound on the device stays in device memory across
// calls (quant/feedback.hpp: keyed and kept as the host's), zeroed by the module at first.
bool zero_device(void* p, size_t bytes) {
  const DeviceOps* d = device_ops();
  return d && d->zero(p, static_cast<int64_t>(bytes)) == MPI_SUCCESS && d->sync() == MPI_SUCCESS;
}
const quant::ResidualMemory kDeviceResidual{device_alloc, device_free, zero_device};

// Record bytes this rank sends to other nodes in the schedule's steps across nodes.
int64_t cross_bytes_sent(const sched::Schedule& s, const topo::Levels& lv) {
  const int me = lv.my_node(), others = lv.shape.nnodes - 1;
  int64_t b = 0;
  for (const sched::Step& st : s.steps) {
    if (st.comm.on != sched::On::Cross || !st.bytes) continue;
    if (st.kind == sched::Kind::Alltoallv)
      for (size_t j = 0; j < st.counts.size(); ++j) b += static_cast<int>(j) == me ? 0 : st.counts[j];
    else if (st.kind == sched::Kind::Allgatherv) b += st.counts[static_cast<size_t>(me)] * others;
    else if (st.kind == sched::Kind::Allgather) b += st.count * others;
  }
  return b;
}

// note_check on the values of the element type `elem` (one the kernels take: quant_elem).
void note_check_elem(const quant::Site& site, MPI_Datatype elem, const void* got, const void* exact, int64_t n) {
  if (elem == MPI_FLOAT) quant::note_check(site, static_cast<const float*>(got), static_cast<const float*>(exact), n);
  else if (elem == MPI_DOUBLE) quant::note_check(site, static_cast<const double*>(got), static_cast<const double*>(exact), n);
#if HIER_QUANT_F16
  else quant::note_check(site, static_cast<const quant::f16*>(got), static_cast<const quant::f16*>(exact), n);
#endif
}


// The allgather's blocks, once `q` is where it stays (they refer to its types); dev: on the device.
void make_blocks(QuantCall& q, const DeviceOps* dev = nullptr) {
  if (q.coll == Coll::Allgather)
    q.blocks = std::make_unique<AgBlocks>(q.src, q.scount, q.st, q.recv, q.block_stride, q.rcount, q.rt, dev);
}

// The Binding of q's schedule on memory `mem` (memory_bytes of q's layout).
void bind(Binding& b, QuantCall& q, char* mem) {
  b.send = q.send;
  b.recv = q.recv;
  b.scratch = mem;
  b.records = mem + records_at(*q.s, q.t);
  b.stride = q.t.size;
  b.type = q.t.type;
  b.op = MPI_SUM;
  b.info = &q.t;
  b.blocks = q.blocks.get();
  b.residual = q.res.get();
}

// The exact collective of the check, started nonblocking on libhier's internal duplicate of the
// communicator (topo::Levels::internal) into chk[0, ...). Started by every rank where the call
// is made (blocking or nonblocking: in the program's order of calls, which MPI makes the same on
// every rank), so it matches whatever moment each rank completes it; the user's communicator
// never carries it, and so never sees a collective the program did not make.
int start_exact(QuantCall& q, char* chk) {
  const char* in = q.copy_in || !q.in || q.on_device ? chk + q.in_off : q.in;
  const MPI_Comm comm = q.ctx->levels->internal;
  const MPI_Datatype e = q.t.type;
  switch (q.coll) {
    case Coll::Allreduce:
      return PMPI_Iallreduce(in, chk, static_cast<int>(q.out_n), e, MPI_SUM, comm, &q.exact);
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter:
      return PMPI_Ireduce_scatter(in, chk, q.icounts.data(), e, MPI_SUM, comm, &q.exact);
    case Coll::Allgather: {
      const int c = static_cast<int>(q.in_bytes / q.t.size);
      return PMPI_Iallgather(in, c, e, chk, c, e, comm, &q.exact);
    }
    default: break;
  }
  return MPI_ERR_INTERN;
}

// What each call (each start of a persistent request) does before its schedule runs, in the
// program's order of calls on every rank: takes the site's residual, samples the check
// (check_this_call) and, when sampled, saves the exact collective's input and starts it.
int begin(QuantCall& q, char* chk) {
  device::DeviceScope on(q.dev ? q.dev->device() : -1);
  q.res = quant::residual(q.site, q.s->residual * q.t.size, q.on_device ? &kDeviceResidual : nullptr);
  q.check = quant::check_this_call(q.ctx, q.coll);
  if (!q.check) return MPI_SUCCESS;
  if (q.on_device) {  // the input copied to the host (my block through the device blocks), waited for
    const DeviceOps* d = q.dev;
    int rc = q.in ? d->copy(chk + q.in_off, q.in, q.in_bytes) : q.blocks->load(q.ctx->levels->rank, chk + q.in_off, q.in_bytes);
    if (rc == MPI_SUCCESS) rc = d->sync();
    return rc == MPI_SUCCESS ? start_exact(q, chk) : rc;
  }
  if (!q.in) {
    if (int rc = q.blocks->load(q.ctx->levels->rank, chk + q.in_off, q.in_bytes); rc != MPI_SUCCESS) return rc;
  } else if (q.copy_in) {
    std::memcpy(chk + q.in_off, q.in, static_cast<size_t>(q.in_bytes));
  }
  return start_exact(q, chk);
}

// What follows a successful run: the statistics, then the check's comparison (its exact
// collective waited for here if still outstanding: a request's completed with the request).
int finish(QuantCall& q, char* chk, bool request) {
  device::DeviceScope on(q.dev ? q.dev->device() : -1);
  const double exact_ns = q.plan.algo == sched::Algorithm::Flat ? q.plan.flat_ns : q.plan.hier_ns;
  quant::note_call(q.coll, q.bits, q.exact_bytes, q.sent_bytes, q.plan.quant_ns, exact_ns, request);
  if (!q.check) return MPI_SUCCESS;
  if (q.exact != MPI_REQUEST_NULL)
    if (int rc = PMPI_Wait(&q.exact, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
  const char* got = q.recv;
  if (q.on_device) {  // the result, in device memory (the run waited for its kernels), to the host
    const DeviceOps* d = q.dev;
    got = chk + q.got_off;
    int rc = d->copy(chk + q.got_off, q.recv, q.out_n * q.t.size);
    if (rc == MPI_SUCCESS) rc = d->sync();
    if (rc != MPI_SUCCESS) return rc;
  } else if (q.dense_off) {
    got = chk + q.dense_off;
    if (int rc = pack(q.recv, q.rcount * q.ctx->levels->size, q.rt, chk + q.dense_off); rc != MPI_SUCCESS) return rc;
  }
  note_check_elem(q.site, q.t.type, got, chk, q.out_n);
  return MPI_SUCCESS;
}

// The blocking call: q's schedule on the context's memory, reserved at the miss. Bound on the
// device (q.on_device): its values and records in the context's device scratch, the residual in
// device memory of its own, the steps as the module's kernels.
int run_blocking(QuantCall& q) {
  Context* ctx = q.ctx;
  const bool on_device = q.on_device;
  char* mem = on_device ? ctx->on_device().dscratch.get(static_cast<size_t>(device_bytes(*q.s, q.t)))
                        : ctx->scratch.get(static_cast<size_t>(memory_bytes(*q.s, q.t, q.check_bytes)));
  if (!mem) return MPI_ERR_NO_MEM;
  // The check's copies: host memory, the context's host scratch on a device binding too.
  char* host = on_device ? ctx->scratch.get(static_cast<size_t>(memory_bytes(*q.s, q.t, q.check_bytes))) : mem;
  if (!host) return MPI_ERR_NO_MEM;
  char* chk = host + check_at(*q.s, q.t);
  make_blocks(q, on_device ? q.dev : nullptr);
  int rc = begin(q, chk);
  if (rc != MPI_SUCCESS) return rc;
  Binding b;
  bind(b, q, mem);
  b.tmp = &ctx->tmp;
  if (on_device) bind_device(b, *ctx);
  rc = run(*q.s, *ctx->levels, b);
  if (rc == MPI_SUCCESS) return finish(q, chk, false);
  if (q.exact != MPI_REQUEST_NULL) PMPI_Wait(&q.exact, MPI_STATUS_IGNORE);  // every rank started it
  return rc;
}

// The nonblocking call (persistent inside a PersistentInit scope): q's schedule as a request,
// on memory of its own in q's layout. begin() runs at every start (`before`): the residual is
// taken and held per start, the check's exact collective becomes a side request the request
// completes with; finish() runs at every successful completion (`after`). Bound on the device
// (q.on_device) as the exact requests are (exec/coll_reductions.cpp): device memory of its own,
// the local steps as the module's kernels, waited for before the request completes.
int start_quant_request(std::unique_ptr<QuantCall> qp, MPI_Request* out) {
  std::shared_ptr<QuantCall> q(std::move(qp));
  auto r = std::make_unique<CollRequest>();
  r->coll = q->coll;
  r->ctx = q->ctx;
  r->sched = q->s;
  if (q->coll == Coll::Allgather) {  // the program may free its datatypes right after the call
    hold_type(*r, q->st);
    hold_type(*r, q->rt);
  }
  const bool dev = q->on_device;
  if (dev) bind_device(r->b, *q->ctx);  // request_scratch then gives device memory
  make_blocks(*q, dev ? q->dev : nullptr);
  char* mem = request_scratch(*r, dev ? device_bytes(*q->s, q->t) : memory_bytes(*q->s, q->t, q->check_bytes), &q->t);
  if (!mem) return MPI_ERR_NO_MEM;
  bind(r->b, *q, mem);
  // The check's copies: host memory; on a device binding the request's own host scratch (or the
  // context's, lent to it with its device scratch when it has no memory of its own).
  char* host = mem;
  if (dev) {
    const size_t hb = static_cast<size_t>(memory_bytes(*q->s, q->t, q->check_bytes));
    host = q->check_bytes == 0 ? nullptr : r->mem ? r->mem->scratch.get(hb) : q->ctx->scratch.get(hb);
    if (q->check_bytes > 0 && !host) return MPI_ERR_NO_MEM;
  }
  char* chk = host ? host + check_at(*q->s, q->t) : nullptr;
  CollRequest* rp = r.get();  // the hooks are rp's: they never outlive it
  r->before = [rp, q, chk] {
    const int rc = begin(*q, chk);
    rp->b.residual = q->res.get();
    if (q->exact != MPI_REQUEST_NULL) {
      rp->side.push_back(q->exact);
      q->exact = MPI_REQUEST_NULL;
    }
    return rc;
  };
  r->after = [q, chk] { return finish(*q, chk, true); };
  return start_request(std::move(r), out);
}
}  // namespace

std::unique_ptr<QuantCall> new_call(Coll coll, int bits, const Prepared& p, std::shared_ptr<const sched::Schedule> s,
                                    const TypeInfo& t, const void* site_buf, int64_t site_count, int64_t check_bytes) {
  auto q = std::make_unique<QuantCall>();
  q->coll = coll;
  q->bits = bits;
  q->ctx = p.ctx;
  q->plan = p.plan;
  q->s = std::move(s);
  q->t = t;
  q->site = quant::Site{p.ctx, coll, site_buf, site_count};
  q->sent_bytes = cross_bytes_sent(*q->s, *p.ctx->levels);
  q->check_bytes = check_bytes;
  return q;
}

std::shared_ptr<const sched::Schedule> quant_schedule(Prepared& p, const sched::Key& key, const TypeInfo& t,
                                                      int64_t check_bytes, const Build& build, int variant,
                                                      bool both) {
  return schedule(p, key, build, [&](const sched::Schedule& s) {
    return p.ctx->scratch.get(static_cast<size_t>(memory_bytes(s, t, check_bytes))) != nullptr &&
           reserve(s, *p.ctx->levels, &t, &p.ctx->tmp) && reserve_device(*p.ctx, s, device_bytes(s, t), &t);
  }, variant, both);
}

int64_t check_bytes_if(int64_t bytes) { return config::get().quant_check_every > 0 ? bytes : 0; }

Ran run_or_start(std::unique_ptr<QuantCall> q, MPI_Request* req) {
  const diag::AlgoTag algo = q->bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  q->on_device = device_call();
  q->dev = q->on_device ? device_ops() : nullptr;
  if (req) return {start_quant_request(std::move(q), req), algo};
  return {run_blocking(*q), algo};
}

}  // namespace hier::exec
