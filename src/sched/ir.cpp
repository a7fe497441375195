#include "sched/ir.hpp"

#include <sstream>

namespace hier::sched {

const char* to_string(Kind k) {
  switch (k) {
    case Kind::Copy: return "copy";
    case Kind::LoadBlock: return "load_block";
    case Kind::StoreBlock: return "store_block";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Allreduce: return "allreduce";
    case Kind::Allgather: return "allgather";
    case Kind::Allgatherv: return "allgatherv";
    case Kind::Bcast: return "bcast";
    case Kind::Scatterv: return "scatterv";
    case Kind::Gatherv: return "gatherv";
    case Kind::Reduce: return "reduce";
    case Kind::Alltoall: return "alltoall";
    case Kind::Barrier: return "barrier";
    case Kind::Send: return "send";
    case Kind::Recv: return "recv";
    case Kind::Alltoallv: return "alltoallv";
    case Kind::Quantize: return "quantize";
    case Kind::Dequantize: return "dequantize";
    case Kind::DequantizeReduce: return "dequantize_reduce";
  }
  return "?";
}

const char* to_string(Via v) { return v == Via::Shm ? "shm" : "mpi"; }

std::string to_string(const CommRef& c) {
  switch (c.on) {
    case On::None: return "local";
    case On::Step: return "step" + std::to_string(c.level);
    case On::Node: return "node";
    case On::Cross: return "cross";
    case On::Leaders: return "leaders";
  }
  return "?";
}

std::string to_string(const Ref& r) {
  const char* b = r.buf == Buf::Send      ? "send"
                  : r.buf == Buf::Recv    ? "recv"
                  : r.buf == Buf::Records ? "records"
                                          : "scratch";
  return std::string(b) + "+" + std::to_string(r.off);
}

namespace {
void list(std::ostringstream& o, const char* name, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  o << ' ' << name << '=';
  for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
}
}  // namespace

namespace {
int64_t total(const Step& st) {
  int64_t t = 0;
  for (int64_t x : st.counts) t += x;
  return t;
}
}  // namespace

bool direct_reduce_scatter(const Step& st, int64_t elem_bytes, int64_t from) {
  return st.kind == Kind::ReduceScatter && elem_bytes > 0 && !st.bytes && total(st) * elem_bytes >= from;
}

bool padded_allgatherv(const Step& st, int64_t elem_bytes, int64_t from) {
  return st.kind == Kind::Allgatherv && total(st) * (elem_bytes > 0 && !st.bytes ? elem_bytes : 1) >= from;
}

size_t group_end(const Schedule& s, size_t i) {
  const size_t n = s.steps.size();
  size_t j = i + 1;
  if (i < n && s.steps[i].wave >= 0)
    while (j < n && s.steps[j].wave == s.steps[i].wave) ++j;
  return j;
}

int64_t count_of(const Schedule& s, Kind k) {
  int64_t n = 0;
  for (const Step& st : s.steps)
    if (st.kind == k) n += st.count;
  return n;
}

std::string to_string(const Schedule& s) {
  std::ostringstream o;
  o << s.name << " (" << (s.unit == Unit::Bytes ? "bytes" : "elements") << ", scratch " << s.scratch << ", "
    << s.steps.size() << " steps";
  if (s.chunks > 1) o << ", " << s.chunks << " chunks pipelined";
  if (s.quant_bits)
    o << ", int" << s.quant_bits << " block " << s.quant_block << ", records " << s.records << " bytes, residual "
      << s.residual;
  o << ")";
  for (const Step& st : s.steps) {
    o << "\n  ";
    if (st.wave >= 0) o << "[wave " << st.wave << "] ";
    o << to_string(st.kind) << " on " << to_string(st.comm);
    if (st.via != Via::Mpi) o << " via " << to_string(st.via) << (st.single ? " single" : "");
    switch (st.kind) {
      case Kind::Barrier: break;
      case Kind::LoadBlock: o << " block " << st.block << " -> " << to_string(st.dst); break;
      case Kind::StoreBlock: o << ' ' << to_string(st.src) << " -> block " << st.block; break;
      case Kind::Bcast:
      case Kind::Recv: o << ' ' << to_string(st.dst); break;
      case Kind::Send: o << ' ' << to_string(st.src); break;
      default:
        if (st.in_place) o << " in place";
        else o << ' ' << to_string(st.src);
        o << " -> " << to_string(st.dst);
    }
    if (st.count) o << " count " << st.count;
    if (st.bytes) o << " bytes";
    if (st.kind == Kind::Quantize && st.residual >= 0) o << " residual+" << st.residual;
    if (st.kind == Kind::DequantizeReduce) o << " parts " << st.parts << " every " << st.part_bytes;
    if (st.kind == Kind::Bcast || st.kind == Kind::Scatterv || st.kind == Kind::Gatherv || st.kind == Kind::Reduce)
      o << " root " << st.root;
    if (st.kind == Kind::Send || st.kind == Kind::Recv) o << " peer " << st.root;
    list(o, "counts", st.counts);
    list(o, "displs", st.displs);
    list(o, "rcounts", st.rcounts);
    list(o, "rdispls", st.rdispls);
  }
  return o.str();
}

}  // namespace hier::sched
