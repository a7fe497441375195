// One quantized call (exec/coll_quant.cpp's entry points make it): what its entry point decided,
// prepared once (a QuantCall: decision, schedule, site, statistics, what the check compares), and
// run blocking on the context's memory, or as a request (exec/request.hpp) on memory of its own
// in the same layout, with begin() as the request's `before` hook and finish() as its `after`
// hook. The memory is reserved and agreed on at the schedule-cache miss (scratch values,
// records, the direct level steps' buffers, the check's copies: nothing large is allocated once
// the ranks depend on each other). The check (HIER_QUANT_CHECK): the exact collective started
// nonblocking on libhier's internal communicator where the call is made, compared once both are
// done. Internal to exec/.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "exec/entry.hpp"
#include "exec/executor.hpp"
#include "exec/prepare.hpp"
#include "quant/site.hpp"

namespace hier::exec {

// HIER_QUANT_BLOCK: values per block. Read from the configuration, which is fixed from MPI_Init
// on and agreed on by every rank (core/agree_config.cpp: same_on_every_rank), so every layout
// below is the same on every rank and on every call with the same schedule key (which holds it).
int64_t kb();

// The allgather's user blocks: my block packed from the send buffer (my block of recvbuf in
// place) in its own type; block r of the result unpacked into recvbuf in the receive type.
class AgBlocks final : public Blocks {
 public:
  // dev: the blocks are device memory of dense types (a device binding), copied by the module.
  AgBlocks(const char* src, int64_t scount, const TypeInfo& st, char* recv, int64_t stride, int64_t rcount,
           const TypeInfo& rt, const DeviceOps* dev = nullptr)
      : src_(src), scount_(scount), st_(st), recv_(recv), stride_(stride), rcount_(rcount), rt_(rt), dev_(dev) {}
  int load(int, char* dst, int64_t) override {
    return dev_ ? dev_->copy(dst, src_, scount_ * st_.size) : pack(src_, scount_, st_, dst);
  }
  int store(int block, const char* src, int64_t) override {
    char* to = recv_ + block * stride_;
    return dev_ ? dev_->copy(to, src, rcount_ * rt_.size) : unpack(src, rcount_, rt_, to);
  }

 private:
  const char* src_;
  int64_t scount_;
  const TypeInfo& st_;
  char* recv_;
  int64_t stride_, rcount_;
  const TypeInfo& rt_;
  const DeviceOps* dev_;
};

// Everything a quantized call's entry point decided (quant_allreduce, quant_reduce_scatter,
// quant_allgather: the decision, the schedule, the site, the statistics, what the check
// compares), shared by the blocking run and the request. On the heap: a request keeps it (its
// hooks hold it) until the request is freed, across the starts of a persistent one.
struct QuantCall {
  config::Coll coll = config::Coll::Allreduce;
  int bits = 0;
  Context* ctx = nullptr;
  model::Plan plan;                          // for the report's predicted times
  std::shared_ptr<const sched::Schedule> s;
  TypeInfo t;                                // the values' type (MPI_FLOAT / MPI_DOUBLE / MPIX_C_FLOAT16): the schedule's unit
  const char* send = nullptr;                // the Binding's buffers
  char* recv = nullptr;
  quant::Site site;
  int64_t exact_bytes = 0, sent_bytes = 0;   // across nodes per call: exact equivalent, records sent
  int64_t check_bytes = 0;                   // reserved after the records (0: HIER_QUANT_CHECK is off)
  // The allgather's user types (held by a request until it completes) and blocks.
  TypeInfo st, rt;
  const char* src = nullptr;
  int64_t scount = 0, rcount = 0, block_stride = 0;
  std::unique_ptr<AgBlocks> blocks;
  // The check, in the check memory: the exact result [0, out_n values); the exact call's input
  // at in_off (in_bytes), copied there from `in` when copy_in (in place: the run overwrites it)
  // or loaded through `blocks` when `in` is null, otherwise read at `in`; a non-dense receive
  // layout's result packed at dense_off (0: dense).
  const char* in = nullptr;
  bool copy_in = false;
  // On a device binding, the input is always copied to in_off (from device memory), and the
  // result is copied to got_off for the comparison (host code never reads device memory).
  int64_t in_off = 0, in_bytes = 0, out_n = 0, dense_off = 0, got_off = 0;
  std::vector<int> icounts;  // reduce-scatter: the counts as the MPI takes them (read until it completes)
  // Per call, or per start of a persistent request: the site's residual, whether the check
  // samples this one and its exact collective while it runs.
  std::shared_ptr<char[]> res;
  bool check = false;
  // The user's buffers are device memory (device_call() where the call was made): the schedule
  // is bound on the device, blocking or as a request, and the residual lives in device memory.
  bool on_device = false;
  // Its device operations (the call's communicator's on the buffers' device), for every later
  // start and completion of a request too, made on that device (device::DeviceScope).
  const DeviceOps* dev = nullptr;
  MPI_Request exact = MPI_REQUEST_NULL;
};

// A quantized call of `coll` on schedule `s` (values of `t`): what every entry point sets alike.
// The call site: `site_buf` (the input buffer) and `site_count`.
std::unique_ptr<QuantCall> new_call(config::Coll coll, int bits, const Prepared& p,
                                    std::shared_ptr<const sched::Schedule> s, const TypeInfo& t, const void* site_buf,
                                    int64_t site_count, int64_t check_bytes);

// The schedule of a quantized call (HIER_DEBUG=TRACE prints it at the miss) and, at the miss,
// the memory it needs, agreed on by every rank: its scratch, records and the check's copies, and
// the direct level steps' buffers (exec::reserve). Null: some rank failed, go exact.
std::shared_ptr<const sched::Schedule> quant_schedule(Prepared& p, const sched::Key& key, const TypeInfo& t,
                                                      int64_t check_bytes, const Build& build, int variant = 0,
                                                      bool both = false);

// The check's memory: `bytes` where HIER_QUANT_CHECK is on, otherwise 0.
int64_t check_bytes_if(int64_t bytes);

// Runs q: blocking where `req` is null, otherwise started as a request whose handle lands in
// *req (persistent inside a PersistentInit scope). The MPI code, with q's algorithm (HierInt8 /
// HierInt4) for the report.
Ran run_or_start(std::unique_ptr<QuantCall> q, MPI_Request* req);

}  // namespace hier::exec
