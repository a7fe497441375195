// Allgather, Allgatherv, Bcast, Alltoall, Barrier: byte schedules. The schedules move bytes;
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
  UserBlocks(const char* send_base, int64_t send_stride, const TypeInfo& st, char* recv_base, const TypeInfo& rt,
             const int64_t* counts, const int64_t* displs, int64_t count)
      : send_base_(send_base), send_stride_(send_stride), st_(st), recv_base_(recv_base), rt_(rt), counts_(counts),
        displs_(displs), count_(count) {}
  int load(int block, char* dst, int64_t) override {
    return pack(send_base_ + block * send_stride_, send_count_, st_, dst);
  }
  int store(int block, const char* src, int64_t) override {
    const int64_t n = counts_ ? counts_[block] : count_;
    const int64_t d = displs_ ? displs_[block] : block * count_;
    return unpack(src, n, rt_, recv_base_ + d * rt_.extent);
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
};

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

int comm_size(MPI_Comm comm) {
  int inter = 0, size = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return 0;
  PMPI_Comm_size(comm, &size);
  return size;
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
        return memory(*p, s.scratch, bytes[rank]) && reserve(s, *p->ctx->levels, nullptr, &p->ctx->tmp);
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
    char* m = request_scratch(*r, s.scratch + (st.dense ? 0 : bytes[rank]), nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    if (!st.dense) {  // packed at every start (persistent requests start many times)
      char* staging = m + s.scratch;
      r->before = [src, scount, staging, info = &r->st] { return pack(src, scount, *info, staging); };
      src = staging;
    }
    r->blocks = std::make_unique<UserBlocks>(nullptr, 0, r->st, static_cast<char*>(recvbuf), r->t,
                                             uniform ? nullptr : r->counts.data(), displs ? r->displs.data() : nullptr,
                                             counts[0]);
    r->b.send = src;
    r->b.scratch = m;
    r->b.blocks = r->blocks.get();
    return start_request(std::move(r), req);
  }
  auto mem = memory(*p, s.scratch, st.dense ? 0 : bytes[rank]);
  if (!mem) return MPI_ERR_NO_MEM;
  if (!st.dense) {
    if (int rc = pack(src, scount, st, mem->staging); rc != MPI_SUCCESS) return rc;
    src = mem->staging;
  }
  UserBlocks blocks(nullptr, 0, st, static_cast<char*>(recvbuf), rt, uniform ? nullptr : counts.data(),
                    displs ? displs->data() : nullptr, counts[0]);
  Binding b;
  b.send = src;
  b.scratch = mem->scratch;
  b.blocks = &blocks;
  b.tmp = &p->ctx->tmp;
  return run(s, *p->ctx->levels, b);
}

}  // namespace

std::optional<Ran> allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* req) {
  const int size = comm_size(comm);
  if (size < 2 || recvcount <= 0) return std::nullopt;
  if (!may_rewrite(Coll::Allgather, recvtype, int64_t{recvcount} * size)) return std::nullopt;
  return gather_all(Coll::Allgather, sendbuf, sendcount, sendtype, recvbuf, std::vector<int64_t>(size, recvcount),
                    nullptr, recvtype, comm, req);
}

std::optional<Ran> allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                              MPI_Request* req) {
  const int size = comm_size(comm);
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
        return memory(*p, s.scratch, bytes) && reserve(s, *p->ctx->levels, nullptr, &p->ctx->tmp);
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
  auto mem = memory(*p, s.scratch, t.dense ? 0 : bytes);
  if (!mem) return MPI_ERR_NO_MEM;
  Binding b;
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
  const int size = comm_size(comm);
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
      [&](const sched::Schedule& s) { return memory(*p, s.scratch, 0).has_value(); });
  if (!sp) return std::nullopt;
  const sched::Schedule& s = *sp;
  const char* send = in_place ? static_cast<const char*>(recvbuf) : static_cast<const char*>(sendbuf);
  if (req) {  // nonblocking: the request owns the types, blocks and memory. In place is safe:
              // every block is loaded (the schedule's first steps) before any is stored.
    auto r = typed_request(Coll::Alltoall, *p, sp, st, rt);
    char* m = request_scratch(*r, s.scratch, nullptr);
    if (!m) return MPI_ERR_NO_MEM;
    auto blocks = std::make_unique<UserBlocks>(send, scount * st.extent, r->st, static_cast<char*>(recvbuf), r->t,
                                               nullptr, nullptr, recvcount);
    blocks->send_count_ = scount;
    r->blocks = std::move(blocks);
    r->b.scratch = m;
    r->b.blocks = r->blocks.get();
    return start_request(std::move(r), req);
  }
  auto mem = memory(*p, s.scratch, 0);
  if (!mem) return MPI_ERR_NO_MEM;
  UserBlocks blocks(send, scount * st.extent, st, static_cast<char*>(recvbuf), rt, nullptr, nullptr, recvcount);
  blocks.send_count_ = scount;
  Binding b;
  b.scratch = mem->scratch;
  b.blocks = &blocks;
  return run(s, *p->ctx->levels, b);
}

}  // namespace hier::exec
