// Allreduce, Reduce, Reduce_scatter_block, Reduce_scatter: element schedules on the user's
// datatype and op. Order of operands changes, so only commutative ops come here; every element
// is still reduced in exactly one place and copied from there, so all ranks get the same bits.
#include <climits>
#include <functional>
#include <numeric>
#include <vector>

#include "exec/coll_quant.hpp"
#include "exec/entry.hpp"
#include "exec/executor.hpp"
#include "exec/prepare.hpp"
#include "exec/request.hpp"
#include "sched/build.hpp"
#include "sched/pipeline.hpp"

namespace hier::exec {
namespace {

using config::Coll;

// The key of an element schedule: what the builder takes, and the datatype's layout, which sizes
// the scratch (the same datatype on every rank: MPI requires it of reductions).
sched::Key element_key(Coll coll, const Prepared& p, bool in_place, bool ordered, int root, int64_t n,
                       const TypeInfo& t, int chunks = 1) {
  sched::Key k{static_cast<uint8_t>(coll), p.plan.algo, in_place, ordered, root, n, {}, chunks};
  k.extent = t.extent;
  k.true_extent = t.true_extent;
  k.true_lb = t.true_lb;
  return k;
}

// What run_elements takes: scratch spanning `s.scratch` elements, and the direct steps' buffers.
Acquirer element_memory(Prepared& p, const TypeInfo& t) {
  return [&p, &t](const sched::Schedule& s) {
    if (s.scratch > 0 && !p.ctx->scratch.get(static_cast<size_t>(t.span(s.scratch)))) return false;
    return reserve(s, *p.ctx->levels, &t, &p.ctx->tmp) &&
           reserve_device(*p.ctx, s, s.scratch > 0 ? t.span(s.scratch) : 0, &t);
  };
}

// Runs an element schedule: scratch spans `scratch` elements laid out like the user's buffers
// (reserved by element_memory when the schedule was built: get() allocates nothing here).
// req: starts it as a nonblocking request instead, on memory of its own (device memory where
// the call's buffers are bound as such: exec/device_steps.hpp).
int run_elements(Prepared& p, const std::shared_ptr<const sched::Schedule>& sp, const void* send, void* recv,
                 const TypeInfo& t, MPI_Op op, Coll coll, MPI_Request* req) {
  const sched::Schedule& s = *sp;
  if (req) {
    auto r = std::make_unique<CollRequest>();
    r->coll = coll;
    r->ctx = p.ctx;
    r->sched = sp;
    r->t = t;
    hold_type(*r, r->t);
    Binding& b = r->b;
    b.send = static_cast<const char*>(send);
    b.recv = static_cast<char*>(recv);
    b.stride = t.extent;
    b.type = r->t.type;
    b.op = op;
    b.info = &r->t;
    if (device_call()) bind_device(b, *p.ctx);  // device buffers: request_scratch gives device memory
    char* mem = request_scratch(*r, s.scratch > 0 ? t.span(s.scratch) : 0, &r->t);
    if (!mem) return MPI_ERR_NO_MEM;
    if (s.scratch > 0) b.scratch = mem - t.true_lb;
    return start_request(std::move(r), req);
  }
  Binding b;
  b.send = static_cast<const char*>(send);
  b.recv = static_cast<char*>(recv);
  b.stride = t.extent;
  b.type = t.type;
  b.op = op;
  b.info = &t;
  b.tmp = &p.ctx->tmp;
  const bool on_device = device_call();
  if (on_device) bind_device(b, *p.ctx);
  if (s.scratch > 0) {
    char* mem = (on_device ? p.ctx->on_device().dscratch : p.ctx->scratch).get(static_cast<size_t>(t.span(s.scratch)));
    if (!mem) return MPI_ERR_NO_MEM;
    b.scratch = mem - t.true_lb;  // element 0's address, so that its first byte is mem[0]
  }
  return run(s, *p.ctx->levels, b);
}

// Common checks; the same on every rank (count, type and op agree across ranks for reductions).
bool eligible(int64_t count, const TypeInfo& t, MPI_Op op) {
  return count > 0 && reorderable(op, t) && t.span(count) <= INT_MAX;
}

}  // namespace

std::optional<Ran> allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm, MPI_Request* req) {
  if (!may_rewrite(Coll::Allreduce, type, count)) return std::nullopt;
  const TypeInfo t = type_info(type);
  if (!eligible(count, t, op)) return std::nullopt;
  auto p = prepare(Coll::Allreduce, count * t.size, comm, t.size, req != nullptr, quantizable_reduction(type, op));
  if (!p) return std::nullopt;
  // HIER_QUANT: MPI_SUM of float / double on a cartesian 2-level shape runs quantized (lossy,
  // bounded); everything else, and a failed acquisition there, goes on exactly. Nonblocking and
  // persistent calls too: the same schedule, run as a request.
  if (auto rc = quant_allreduce(*p, sendbuf, recvbuf, count, type, op, t, req)) return rc;
  if (p->plan.algo == sched::Algorithm::Flat) return std::nullopt;  // the quantized plan declined: the MPI
  const bool in_place = sendbuf == MPI_IN_PLACE;
  // A user op's every element reduced in one place; the plan's split (model::Plan::split_top).
  const bool ordered = !predefined_op(op) || p->plan.split_top;
  const int rank = p->ctx->levels->rank;
  const int chunks = p->plan.chunks;
  auto s = schedule(*p, element_key(Coll::Allreduce, *p, in_place, ordered, -1, count, t, chunks),
                                      [&](int) {
                                        return sched::pipeline(count, chunks, [&](int64_t n) {
                                          return sched::build_allreduce(p->ctx->levels->shape, rank, n, in_place, p->plan.algo, ordered);
                                        });
                                      }, element_memory(*p, t));
  if (!s) return std::nullopt;
  if (s->chunks > 1) note_pipelined(Coll::Allreduce, s->chunks);
  return run_elements(*p, s, sendbuf, recvbuf, t, op, Coll::Allreduce, req);
}

std::optional<Ran> reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm, MPI_Request* req) {
  if (!may_rewrite(Coll::Reduce, type, count)) return std::nullopt;
  const TypeInfo t = type_info(type);
  if (!eligible(count, t, op)) return std::nullopt;
  auto p = prepare(Coll::Reduce, count * t.size, comm, t.size, req != nullptr);
  if (!p) return std::nullopt;
  const int rank = p->ctx->levels->rank;
  if (root < 0 || root >= p->ctx->levels->size) return std::nullopt;  // PMPI reports the error
  const bool in_place = rank == root && sendbuf == MPI_IN_PLACE;
  // Only the root may pass MPI_IN_PLACE, and may do so in one call and not the next: the key
  // leaves it out (keys must be equal on every rank) and the root keeps both forms.
  auto s = schedule(*p, element_key(Coll::Reduce, *p, false, false, root, count, t),
                                      [&](int v) { return sched::build_reduce(p->ctx->levels->shape, rank, count, root, v == 1, p->plan.algo); },
                                      element_memory(*p, t), in_place ? 1 : 0, rank == root);
  if (!s) return std::nullopt;
  return run_elements(*p, s, sendbuf, recvbuf, t, op, Coll::Reduce, req);
}

namespace {

std::optional<Ran> reduce_scatter_counts(Coll coll, const void* sendbuf, void* recvbuf, std::vector<int64_t> counts,
                                         const TypeInfo& t, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (!eligible(total, t, op)) return std::nullopt;
  auto p = prepare(coll, total * t.size, comm, t.size, req != nullptr, quantizable_reduction(t.type, op));
  if (!p) return std::nullopt;
  // HIER_QUANT: float / double MPI_SUM on a cartesian 2-level shape runs quantized, blocking,
  // nonblocking or persistent (a request on the same schedule).
  if (auto rc = quant_reduce_scatter(*p, coll, sendbuf, recvbuf, counts, op, t, req)) return rc;
  if (p->plan.algo == sched::Algorithm::Flat) return std::nullopt;  // the quantized plan declined: the MPI
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int rank = p->ctx->levels->rank;
  // reduce_scatter_block: one count describes them all.
  const bool block = coll == Coll::ReduceScatterBlock;
  sched::Key key = element_key(coll, *p, in_place, false, -1, block ? counts[0] : total, t);
  if (!block) key.counts = counts;
  auto s = schedule(*p, key, [&](int) {
    return sched::build_reduce_scatter(p->ctx->levels->shape, rank, counts, in_place);
  }, element_memory(*p, t));
  if (!s) return std::nullopt;
  return run_elements(*p, s, sendbuf, recvbuf, t, op, coll, req);
}

}  // namespace

std::optional<Ran> reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  const int size = intracomm_size(comm);
  if (size < 2 || recvcount <= 0) return std::nullopt;
  if (!may_rewrite(Coll::ReduceScatterBlock, type, int64_t{recvcount} * size)) return std::nullopt;
  return reduce_scatter_counts(Coll::ReduceScatterBlock, sendbuf, recvbuf, std::vector<int64_t>(size, recvcount),
                               type_info(type), op, comm, req);
}

std::optional<Ran> reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  const int size = intracomm_size(comm);
  if (size < 2 || !recvcounts) return std::nullopt;
  std::vector<int64_t> counts(recvcounts, recvcounts + size);
  for (int64_t c : counts)
    if (c < 0) return std::nullopt;
  if (!may_rewrite(Coll::ReduceScatter, type, std::accumulate(counts.begin(), counts.end(), int64_t{0})))
    return std::nullopt;
  return reduce_scatter_counts(Coll::ReduceScatter, sendbuf, recvbuf, std::move(counts), type_info(type), op, comm, req);
}

}  // namespace hier::exec
