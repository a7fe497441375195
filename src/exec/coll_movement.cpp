// Allgather, Allgatherv, Bcast, Alltoall, Barrier, Gather, Scatter: byte schedules. The schedules move bytes;
// the user's datatypes only matter where data enters and leaves (dense types are used in place,
// others are packed/unpacked with PMPI_Pack/Unpack). Decisions use byte counts only, which the
// MPI standard makes equal on every rank, never a rank's own datatype.
#include <climits>
#include <memory>
#include <numeric>
#include <vector>

#include "dtype/signature.hpp"
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

// The user's per-rank blocks: block r is counts[r] elements of `type` at base + displs[r] * extent.
class UserBlocks final : public Blocks {
 public:
  // dev: the blocks are device memory of dense types, copied by the module (exec/device_steps.hpp).
  UserBlocks(const char* send_base, int64_t send_stride, const TypeInfo& st, char* recv_base, const TypeInfo& rt,
             const int64_t* counts, const int64_t* displs, int64_t count, const DeviceOps* dev = nullptr)
      : send_base_(send_base), send_stride_(send_stride), st_(st), recv_base_(recv_base), rt_(rt), counts_(counts),
        displs_(displs), count_(count), dev_(dev) {}
  int load(int block, char* dst, int64_t) override {
    const char* from = send_base_ + block * send_stride_;
    return dev_ ? dev_->copy(dst, from, send_count_ * st_.size) : pack(from, send_count_, st_, dst);
  }
  int store(int block, const char* src, int64_t) override {
    const int64_t n = counts_ ? counts_[block] : count_;
    char* to = recv_base_ + (displs_ ? displs_[block] : block * count_) * rt_.extent;
    return dev_ ? dev_->copy(to, src, n * rt_.size) : unpack(src, n, rt_, to);
  }
  int64_t send_count_ = 0;

 private:
  const char* send_base_;
  int64_t send_stride_;
  const TypeInfo& st_;
  char* recv_base_;
  const TypeInfo& rt_;
  const int64_t* counts_;
  const int64_t* displs_;
  int64_t count_;
  const DeviceOps* dev_;
};

// The GPU module where the call's buffers are bound as device memory (core/dispatch_coll.hpp's
// DeviceCall: dense device buffers on a Context::device_hier communicator), else null.
const DeviceOps* call_device() { return device_call() ? device_ops() : nullptr; }

// Scratch for the schedule plus a staging area for packed user data.
struct Memory {
  char* scratch = nullptr;
  char* staging = nullptr;
};
std::optional<Memory> memory(Prepared& p, int64_t scratch, int64_t staging) {
  char* m = p.ctx->scratch.get(static_cast<size_t>(scratch + staging));
  if (!m) return std::nullopt;
  return Memory{m, m + scratch};
}

// A nonblocking call's request on schedule `sp` with send type `st` and receive type `rt`: it
// owns copies of both (the Binding and the blocks refer to them), each held until completion,
// since the program may free its datatypes right after the call.
std::unique_ptr<CollRequest> typed_request(Coll coll, const Prepared& p, std::shared_ptr<const sched::Schedule> sp,
                                           const TypeInfo& st, const TypeInfo& rt) {
  auto r = std::make_unique<CollRequest>();
  r->coll = coll;
  r->ctx = p.ctx;
  r->sched = std::move(sp);
  r->st = st;
  r->t = rt;
  hold_type(*r, r->st);
  hold_type(*r, r->t);
  return r;
}

// Allgather and allgatherv: counts/displs in elements of the receive type.
std::optional<Ran> gather_all(Coll coll, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const std::vector<int64_t>& counts, const std::vector<int64_t>* displs,
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* req) {
  const TypeInfo rt = type_info(recvtype);
  if (!rt.ok) return std::nullopt;
  std::vector<int64_t> bytes(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) bytes[r] = counts[r] * rt.size;
  const int64_t total = std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
  if (total <= 0 || total > INT_MAX) return std::nullopt;
  // The allgather's schedule runs in bytes; its element size is the size of its type signature's
  // element type (4: floats, 8: doubles, 2: MPIX_C_FLOAT16, 1: anything else), which the
  // planner's cost of the quantized allgather needs. Never the receive type's own size: ranks may
  // pass the same signature as MPI_FLOAT x 2n or as a type of 2 floats x n, and must plan alike.
  int64_t elem_size = 1;
  bool quantizable = false;
  if (coll == Coll::Allgather) {
    const MPI_Datatype elem = dtype::signature_elem(recvtype);
    elem_size = quant_elem_size(elem);
    quantizable = quant_elem(elem);
  }
  auto p = prepare(coll, total, comm, elem_size, req != nullptr, quantizable);
  if (!p) return std::nullopt;
  // HIER_QUANT: an allgather of float / double on a cartesian 2-level shape runs quantized,
  // blocking, nonblocking or persistent (a request on the same schedule).
  if (coll == Coll::Allgather)
    if (auto rc = quant_allgather(*p, sendbuf, sendcount, sendtype, recvbuf, static_cast<int>(counts[0]), rt, req))
      return rc;
  if (p->plan.algo == sched::Algorithm::Flat) return std::nullopt;  // the quantized plan declined: the MPI
  const int rank = p->ctx->levels->rank;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const bool uniform = coll == Coll::Allgather;
  sched::Key key{static_cast<uint8_t>(coll), p->plan.algo, false, false, -1, uniform ? bytes[0] : total, {}};
  if (!uniform) key.counts = bytes;
  // Staging for my block is reserved whether or not my send type needs it: a rank's datatype
  // layout is not part of the key (only its signature is the same everywhere), so no call may
  // need memory that its key's miss did not reserve.
  auto sp = schedule(
      *p, key, [&](int) { return sched::build_allgather(p->ctx->levels->shape, rank, bytes); },
      [&](const sched::Schedule& s) {
        return memory(*p, s.scratch, bytes[rank]) && reserve(s, *p->ctx->levels, nullptr, &p->ctx->tmp) &&
               reserve_device(*p->ctx, s, s.scratch, nullptr);
      });
  if (!sp) return std::nullopt;
  const sched::Schedule& s = *sp;

  // My block as bytes: the user's send buffer (or my block of recvbuf) if dense, else packed.
  const int64_t my_disp = displs ? (*displs)[rank] : rank * counts[0];
  const char* src = in_place ? static_cast<const char*>(recvbuf) + my_disp * rt.extent : static_cast<const char*>(sendbuf);
  const TypeInfo st = in_place ? rt : type_info(sendtype);
  const int64_t scount = in_place ? counts[rank] : sendcount;
  if (!st.ok || scount * st.size != bytes[rank]) return std::nullopt;  // PMPI reports the mismatch
  if (req) {  // nonblocking: the request owns the types, counts, blocks and memory
    auto r = typed_request(coll, *p, sp, st, rt);
    r->counts = counts;
    if (displs) r->displs = *displs;
    const DeviceOps* dev = call_device();
    if (dev) bind_device(r->b, *p->ctx);  // dense device buffers: device scratch, no staging
    char* m = request_scratch(*r, s.scratch + (st.dense ? 0 : bytes[rank]), nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    if (!st.dense) {  // packed at every start (persistent requests start many times)
      char* staging = m + s.scratch;
      r->before = [src, scount, staging, info = &r->st] { return pack(src, scount, *info, staging); };
      src = staging;
    }
    r->blocks = std::make_unique<UserBlocks>(nullptr, 0, r->st, static_cast<char*>(recvbuf), r->t,
                                             uniform ? nullptr : r->counts.data(), displs ? r->displs.data() : nullptr,
                                             counts[0], dev);
    r->b.send = src;
    r->b.scratch = m;
    r->b.blocks = r->blocks.get();
    return start_request(std::move(r), req);
  }
  Binding b;
  if (device_call()) {  // dense device buffers (core/dispatch_coll.hpp): no staging
    UserBlocks blocks(nullptr, 0, st, static_cast<char*>(recvbuf), rt, uniform ? nullptr : counts.data(),
                      displs ? displs->data() : nullptr, counts[0], device_ops());
    b.send = src;
    b.blocks = &blocks;
    return run_on_device(s, b, *p->ctx);
  }
  auto mem = memory(*p, s.scratch, st.dense ? 0 : bytes[rank]);
  if (!mem) return MPI_ERR_NO_MEM;
  if (!st.dense) {
    if (int rc = pack(src, scount, st, mem->staging); rc != MPI_SUCCESS) return rc;
    src = mem->staging;
  }
  UserBlocks blocks(nullptr, 0, st, static_cast<char*>(recvbuf), rt, uniform ? nullptr : counts.data(),
                    displs ? displs->data() : nullptr, counts[0]);
  b.send = src;
  b.scratch = mem->scratch;
  b.blocks = &blocks;
  b.tmp = &p->ctx->tmp;
  return run(s, *p->ctx->levels, b);
}

}  // namespace

std::optional<Ran> allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* req) {
  const int size = intracomm_size(comm);
  if (size < 2 || recvcount <= 0) return std::nullopt;
  if (!may_rewrite(Coll::Allgather, recvtype, int64_t{recvcount} * size)) return std::nullopt;
  return gather_all(Coll::Allgather, sendbuf, sendcount, sendtype, recvbuf, std::vector<int64_t>(size, recvcount),
                    nullptr, recvtype, comm, req);
}

std::optional<Ran> allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                              MPI_Request* req) {
  const int size = intracomm_size(comm);
  if (size < 2 || !recvcounts || !displs) return std::nullopt;
  std::vector<int64_t> counts(recvcounts, recvcounts + size), disp(displs, displs + size);
  for (int64_t c : counts)
    if (c < 0) return std::nullopt;
  if (!may_rewrite(Coll::Allgatherv, recvtype, std::accumulate(counts.begin(), counts.end(), int64_t{0})))
    return std::nullopt;
  return gather_all(Coll::Allgatherv, sendbuf, sendcount, sendtype, recvbuf, counts, &disp, recvtype, comm, req);
}

std::optional<Ran> bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req) {
  if (!may_rewrite(Coll::Bcast, type, count)) return std::nullopt;
  const TypeInfo t = type_info(type);
  if (count <= 0 || !t.ok) return std::nullopt;
  const int64_t bytes = count * t.size;
  if (bytes > INT_MAX) return std::nullopt;
  auto p = prepare(Coll::Bcast, bytes, comm, 1, req != nullptr);
  if (!p) return std::nullopt;
  const int rank = p->ctx->levels->rank;
  if (root < 0 || root >= p->ctx->levels->size) return std::nullopt;
  const int chunks = p->plan.chunks;
  // Staging (for a non-contiguous datatype) is reserved whatever this rank's datatype: see gather_all.
  auto sp = schedule(
      *p, {static_cast<uint8_t>(Coll::Bcast), p->plan.algo, false, false, root, bytes, {}, chunks},
      [&](int) {
        return sched::pipeline(bytes, chunks, [&](int64_t n) {
          return sched::build_bcast(p->ctx->levels->shape, rank, n, root, p->plan.algo);
        });
      },
      [&](const sched::Schedule& s) {
        return memory(*p, s.scratch, bytes) && reserve(s, *p->ctx->levels, nullptr, &p->ctx->tmp) &&
               reserve_device(*p->ctx, s, s.scratch, nullptr);
      });
  if (!sp) return std::nullopt;
  const sched::Schedule& s = *sp;
  if (s.chunks > 1) note_pipelined(Coll::Bcast, s.chunks);
  if (req) {  // nonblocking: staging of its own; the non-root ranks unpack once it is done
    auto r = std::make_unique<CollRequest>();
    r->coll = Coll::Bcast;
    r->ctx = p->ctx;
    r->sched = sp;
    r->t = t;
    hold_type(*r, r->t);
    if (device_call()) bind_device(r->b, *p->ctx);  // a dense device buffer: device scratch
    char* m = request_scratch(*r, s.scratch + (t.dense ? 0 : bytes), nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    char* staging = m + s.scratch;
    r->b.recv = t.dense ? static_cast<char*>(buffer) : staging;
    r->b.scratch = m;
    if (!t.dense) {
      if (rank == root) {
        r->before = [staging, count, buffer, info = &r->t] { return pack(buffer, count, *info, staging); };
      } else {
        r->after = [staging, count, buffer, info = &r->t] { return unpack(staging, count, *info, buffer); };
      }
    }
    return start_request(std::move(r), req);
  }
  Binding b;
  if (device_call()) {  // a dense device buffer (core/dispatch_coll.hpp), in place
    b.recv = static_cast<char*>(buffer);
    return run_on_device(s, b, *p->ctx);
  }
  auto mem = memory(*p, s.scratch, t.dense ? 0 : bytes);
  if (!mem) return MPI_ERR_NO_MEM;
  b.recv = t.dense ? static_cast<char*>(buffer) : mem->staging;
  b.scratch = mem->scratch;
  b.tmp = &p->ctx->tmp;
  if (!t.dense && rank == root)
    if (int rc = pack(buffer, count, t, mem->staging); rc != MPI_SUCCESS) return rc;
  const int rc = run(s, *p->ctx->levels, b);
  if (rc == MPI_SUCCESS && !t.dense && rank != root) return unpack(mem->staging, count, t, buffer);
  return rc;
}

std::optional<Ran> barrier(MPI_Comm comm, MPI_Request* req) {
  if (!may_rewrite(Coll::Barrier, MPI_BYTE, 0)) return std::nullopt;
  auto p = prepare(Coll::Barrier, 0, comm, 1, req != nullptr);
  if (!p) return std::nullopt;
  const int rank = p->ctx->levels->rank;
  auto s = schedule(*p, {static_cast<uint8_t>(Coll::Barrier), p->plan.algo, false, false, -1, 0, {}},
                                      [&](int) { return sched::build_barrier(p->ctx->levels->shape, rank); },
                                      [](const sched::Schedule&) { return true; });
  if (!s) return std::nullopt;
  if (req) {  // nonblocking: no buffers; a request of its own all the same (it holds no memory)
    auto r = std::make_unique<CollRequest>();
    r->coll = Coll::Barrier;
    r->ctx = p->ctx;
    r->sched = s;
    char* m = request_scratch(*r, 0, nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    r->b.scratch = m;
    return start_request(std::move(r), req);
  }
  return run(*s, *p->ctx->levels, Binding{});
}

std::optional<Ran> alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* req) {
  const int size = intracomm_size(comm);
  if (size < 2 || recvcount <= 0 || !may_rewrite(Coll::Alltoall, recvtype, int64_t{recvcount} * size)) return std::nullopt;
  const TypeInfo rt = type_info(recvtype);
  if (!rt.ok) return std::nullopt;
  const int64_t block = recvcount * rt.size, total = block * size;
  if (total > INT_MAX / 2) return std::nullopt;  // scratch holds two copies
  auto p = prepare(Coll::Alltoall, total, comm, 1, req != nullptr);
  if (!p) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const TypeInfo st = in_place ? rt : type_info(sendtype);
  const int64_t scount = in_place ? recvcount : sendcount;
  if (!st.ok || scount * st.size != block) return std::nullopt;
  const int rank = p->ctx->levels->rank;
  auto sp = schedule(
      *p, {static_cast<uint8_t>(Coll::Alltoall), p->plan.algo, false, false, -1, block, {}},
      [&](int) { return sched::build_alltoall(p->ctx->levels->shape, rank, block); },
      [&](const sched::Schedule& s) {
        return memory(*p, s.scratch, 0).has_value() && reserve_device(*p->ctx, s, s.scratch, nullptr);
      });
  if (!sp) return std::nullopt;
  const sched::Schedule& s = *sp;
  const char* send = in_place ? static_cast<const char*>(recvbuf) : static_cast<const char*>(sendbuf);
  const DeviceOps* dev = call_device();
  if (req) {  // nonblocking: the request owns the types, blocks and memory. In place is safe:
              // every block is loaded (the schedule's first steps) before any is stored.
    auto r = typed_request(Coll::Alltoall, *p, sp, st, rt);
    if (dev) bind_device(r->b, *p->ctx);
    char* m = request_scratch(*r, s.scratch, nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    auto blocks = std::make_unique<UserBlocks>(send, scount * st.extent, r->st, static_cast<char*>(recvbuf), r->t,
                                               nullptr, nullptr, recvcount, dev);
    blocks->send_count_ = scount;
    r->blocks = std::move(blocks);
    r->b.scratch = m;
    r->b.blocks = r->blocks.get();
    return start_request(std::move(r), req);
  }
  UserBlocks blocks(send, scount * st.extent, st, static_cast<char*>(recvbuf), rt, nullptr, nullptr, recvcount, dev);
  blocks.send_count_ = scount;
  Binding b;
  b.blocks = &blocks;
  if (dev) {
    return run_on_device(s, b, *p->ctx);
  }
  auto mem = memory(*p, s.scratch, 0);
  if (!mem) return MPI_ERR_NO_MEM;
  b.scratch = mem->scratch;
  return run(s, *p->ctx->levels, b);
}

namespace {

// Gather and scatter: every rank's block has the same bytes (the type signatures match), which
// each rank computes from its own arguments: a gather's send side (the root's receive side in
// place), a scatter's receive side (the root's send side in place). The root's user blocks go
// through UserBlocks (StoreBlock / LoadBlock); the other ranks' own block is their send buffer
// (gather) or receive buffer (scatter), packed or unpacked in staging when not dense.
struct Rooted {
  int size = 0, rank = 0;
  bool is_root = false, in_place = false;
  TypeInfo mine;  // the type of this rank's own block
  int64_t count = 0, b = 0;
};
std::optional<Rooted> rooted(Coll coll, const void* own_buf, int own_count, MPI_Datatype own_type,
                             int other_count, MPI_Datatype other_type, int root, MPI_Comm comm) {
  Rooted x;
  x.size = intracomm_size(comm);
  if (x.size < 2 || root < 0 || root >= x.size) return std::nullopt;  // PMPI reports a bad root
  PMPI_Comm_rank(comm, &x.rank);
  x.is_root = x.rank == root;
  x.in_place = x.is_root && own_buf == MPI_IN_PLACE;
  x.mine = x.in_place ? type_info(other_type) : type_info(own_type);
  x.count = x.in_place ? other_count : own_count;
  if (!x.mine.ok || x.count <= 0) return std::nullopt;
  x.b = x.count * x.mine.size;
  if (x.b * x.size > INT_MAX || !may_rewrite(coll, MPI_BYTE, x.b * x.size)) return std::nullopt;
  return x;
}

}  // namespace

std::optional<Ran> gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* req) {
  auto x = rooted(Coll::Gather, sendbuf, sendcount, sendtype, recvcount, recvtype, root, comm);
  if (!x) return std::nullopt;
  auto p = prepare(Coll::Gather, x->b * x->size, comm, 1, req != nullptr);
  if (!p) return std::nullopt;
  const int64_t b = x->b;
  // Staging for my block is reserved whatever my type's layout (see gather_all).
  auto sp = schedule(
      *p, {static_cast<uint8_t>(Coll::Gather), p->plan.algo, false, false, root, b, {}},
      [&](int) { return sched::build_gather(p->ctx->levels->shape, x->rank, b, root); },
      [&](const sched::Schedule& s) {
        return memory(*p, s.scratch, b).has_value() && reserve_device(*p->ctx, s, s.scratch, nullptr);
      });
  if (!sp) return std::nullopt;
  const sched::Schedule& s = *sp;
  const DeviceOps* dev = call_device();  // dense device buffers: no staging
  const TypeInfo rt = x->is_root ? type_info(recvtype) : x->mine;
  if (!rt.ok || (x->is_root && int64_t{recvcount} * rt.size != b)) return std::nullopt;  // PMPI reports it
  const TypeInfo& st = x->mine;
  const char* src = x->in_place ? static_cast<const char*>(recvbuf) + int64_t{root} * recvcount * rt.extent
                                : static_cast<const char*>(sendbuf);
  if (req) {  // nonblocking: the request owns the types, blocks and memory
    auto r = typed_request(Coll::Gather, *p, sp, st, rt);
    if (dev) bind_device(r->b, *p->ctx);
    char* m = request_scratch(*r, s.scratch + (st.dense ? 0 : b), nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    if (!st.dense) {  // packed at every start
      char* staging = m + s.scratch;
      r->before = [src, n = x->count, staging, info = &r->st] { return pack(src, n, *info, staging); };
      src = staging;
    }
    if (x->is_root)
      r->blocks = std::make_unique<UserBlocks>(nullptr, 0, r->st, static_cast<char*>(recvbuf), r->t, nullptr, nullptr,
                                               recvcount, dev);
    r->b.send = src;
    r->b.scratch = m;
    r->b.blocks = r->blocks.get();
    return start_request(std::move(r), req);
  }
  UserBlocks blocks(nullptr, 0, st, static_cast<char*>(recvbuf), rt, nullptr, nullptr, recvcount, dev);
  Binding bd;
  bd.blocks = &blocks;
  if (dev) {
    bd.send = src;
    return run_on_device(s, bd, *p->ctx);
  }
  auto mem = memory(*p, s.scratch, st.dense ? 0 : b);
  if (!mem) return MPI_ERR_NO_MEM;
  if (!st.dense) {
    if (int rc = pack(src, x->count, st, mem->staging); rc != MPI_SUCCESS) return rc;
    src = mem->staging;
  }
  bd.send = src;
  bd.scratch = mem->scratch;
  return run(s, *p->ctx->levels, bd);
}

std::optional<Ran> scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* req) {
  auto x = rooted(Coll::Scatter, recvbuf, recvcount, recvtype, sendcount, sendtype, root, comm);
  if (!x) return std::nullopt;
  auto p = prepare(Coll::Scatter, x->b * x->size, comm, 1, req != nullptr);
  if (!p) return std::nullopt;
  const int64_t b = x->b;
  // Only the root may pass MPI_IN_PLACE, and may in one call and not the next: the key leaves
  // it out and the root keeps both forms (as the reduce's).
  auto sp = schedule(
      *p, {static_cast<uint8_t>(Coll::Scatter), p->plan.algo, false, false, root, b, {}},
      [&](int v) { return sched::build_scatter(p->ctx->levels->shape, x->rank, b, root, v == 1); },
      [&](const sched::Schedule& s) {
        return memory(*p, s.scratch, b).has_value() && reserve_device(*p->ctx, s, s.scratch, nullptr);
      },
      x->in_place ? 1 : 0, x->is_root);
  if (!sp) return std::nullopt;
  const sched::Schedule& s = *sp;
  const DeviceOps* dev = call_device();  // dense device buffers: no staging
  const TypeInfo st = x->is_root ? type_info(sendtype) : x->mine;
  if (!st.ok || (x->is_root && int64_t{sendcount} * st.size != b)) return std::nullopt;  // PMPI reports it
  const TypeInfo& rt = x->mine;
  // My block lands in the receive buffer, or in staging to be unpacked (not the root in place).
  const bool staged = !x->in_place && !rt.dense;
  if (req) {
    auto r = typed_request(Coll::Scatter, *p, sp, st, rt);
    if (dev) bind_device(r->b, *p->ctx);
    char* m = request_scratch(*r, s.scratch + (staged ? b : 0), nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    r->b.recv = x->in_place ? nullptr : staged ? m + s.scratch : static_cast<char*>(recvbuf);
    if (staged)
      r->after = [from = m + s.scratch, n = x->count, recvbuf, info = &r->t] { return unpack(from, n, *info, recvbuf); };
    if (x->is_root) {
      auto blocks = std::make_unique<UserBlocks>(static_cast<const char*>(sendbuf), sendcount * st.extent, r->st,
                                                 nullptr, r->t, nullptr, nullptr, 0, dev);
      blocks->send_count_ = sendcount;
      r->blocks = std::move(blocks);
    }
    r->b.scratch = m;
    r->b.blocks = r->blocks.get();
    return start_request(std::move(r), req);
  }
  UserBlocks blocks(static_cast<const char*>(sendbuf), sendcount * st.extent, st, nullptr, rt, nullptr, nullptr, 0, dev);
  blocks.send_count_ = sendcount;
  Binding bd;
  bd.blocks = &blocks;
  if (dev) {
    bd.recv = x->in_place ? nullptr : static_cast<char*>(recvbuf);
    return run_on_device(s, bd, *p->ctx);
  }
  auto mem = memory(*p, s.scratch, staged ? b : 0);
  if (!mem) return MPI_ERR_NO_MEM;
  bd.recv = x->in_place ? nullptr : staged ? mem->staging : static_cast<char*>(recvbuf);
  bd.scratch = mem->scratch;
  const int rc = run(s, *p->ctx->levels, bd);
  if (rc == MPI_SUCCESS && staged) return unpack(mem->staging, x->count, rt, recvbuf);
  return rc;
}

}  // namespace hier::exec
