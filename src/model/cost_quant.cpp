#include "model/cost_quant.hpp"

#include <algorithm>
#include <vector>

#include "model/cost.hpp"
#include "sched/ir.hpp"

namespace hier::model {
namespace {

using config::Coll;
using sched::Kind;
using sched::On;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One communication step of the quantized schedule on `on`, costed as a schedule step with all
// L ranks of the node running it at once (every local index has its own cross communicator).
struct Steps {
  const topo::Shape& s;
  const Model& m;
  int flows;
  double t = 0;
  void add(Kind k, On on, int64_t count, std::vector<int64_t> counts, int64_t unit_bytes) {
    sched::Step st;
    st.kind = k;
    st.comm.on = on;
    st.count = count;
    st.counts = std::move(counts);
    t += step_cost(st, 0, s, m, unit_bytes, flows) + m.step_overhead_ns;
  }
};

}  // namespace

int64_t quant_record_bytes(int64_t n, int64_t block, int bits) {
  if (n <= 0) return 0;
  const int64_t full = n / block, rest = n % block;
  auto rec = [&](int64_t len) { return 4 + (bits == 8 ? len : (len + 1) / 2); };
  return full * rec(block) + (rest ? rec(rest) : 0);
}

int64_t quant_floor_bytes(int64_t block, int ranks, int64_t elem_size) { return block * ranks * elem_size; }

double quant_cost(Coll coll, int64_t bytes, int64_t e, const topo::Shape& s, const Model& m, int bits, int64_t B) {
  if (!s.cartesian || s.nlevels() != 2 || e <= 0 || B <= 0) return 0;
  const int L = s.dims[0], N = s.nnodes, P = L * N;
  const int64_t v = bytes / e;
  // ns per value: quantize, dequantize, dequantize + add. The rates are per byte of float input
  // or output; a 16-bit value is widened to float and costs what a float does (not measured
  // apart), so the kernels count at least 4 bytes per value, the levels' steps its e bytes.
  const QuantRates& r = m.quant(bits);
  const double ed = static_cast<double>(std::max<int64_t>(e, 4));
  const double q = r.quantize_ns_per_byte * ed, dq = r.dequantize_ns_per_byte * ed, dqa = r.dequantize_add_ns_per_byte * ed;
  Steps st{s, m, L};
  double cpu = 0;  // values quantized / dequantized, in ns
  switch (coll) {
    case Coll::Allreduce: {
      const int64_t S = std::min(ceil_div(ceil_div(v, B), L) * B, v);
      const int64_t Q = std::min(ceil_div(ceil_div(S, B), N) * B, S);
      st.add(Kind::ReduceScatter, On::Node, 0, std::vector<int64_t>(L, S), e);
      st.add(Kind::Alltoall, On::Cross, quant_record_bytes(Q, B, bits), {}, 1);
      st.add(Kind::Allgatherv, On::Cross, 0, std::vector<int64_t>(N, quant_record_bytes(Q, B, bits)), 1);
      st.add(Kind::Allgatherv, On::Node, 0, std::vector<int64_t>(L, S), e);
      cpu = static_cast<double>(S) * q + static_cast<double>(N * Q) * dqa + static_cast<double>(Q) * q +
            static_cast<double>(S) * dq;
      break;
    }
    case Coll::ReduceScatter:
    case Coll::ReduceScatterBlock: {
      const int64_t c = ceil_div(v, P);
      st.add(Kind::ReduceScatter, On::Node, 0, std::vector<int64_t>(L, N * c), e);
      st.add(Kind::Alltoall, On::Cross, quant_record_bytes(c, B, bits), {}, 1);
      cpu = static_cast<double>(v * e) * m.copy_ns_per_byte + static_cast<double>(N * c) * q +
            static_cast<double>(N * c) * dqa;
      break;
    }
    case Coll::Allgather: {
      const int64_t c = ceil_div(v, P), rec = quant_record_bytes(c, B, bits);
      st.add(Kind::Allgather, On::Cross, rec, {}, 1);
      st.add(Kind::Allgather, On::Node, N * rec, {}, 1);
      cpu = static_cast<double>(c) * q + static_cast<double>(P * c) * dq;
      break;
    }
    default: return 0;
  }
  return st.t + cpu;
}

void weigh_quant(const Call& call, const topo::Shape& s, const Model& m, const config::Config& cfg, Plan& p) {
  const config::Quant mode = cfg.quant_for(call.coll);
  if (mode == config::Quant::Off) return;
  const bool reduction =
      call.coll == Coll::Allreduce || call.coll == Coll::ReduceScatter || call.coll == Coll::ReduceScatterBlock;
  if (!reduction && call.coll != Coll::Allgather) return;
  const int64_t e = call.elem_size;  // allgather too: the receive type's size (exec/coll_movement.cpp)
  if (e != 4 && e != 8 && e != 2) return void(p.quant_why = "not a float, double or float16 size");
  if (!s.cartesian || s.nlevels() != 2) return void(p.quant_why = "shape not cartesian with 2 levels");
  const int bits = mode == config::Quant::Int8 ? 8 : 4;
  if (call.bytes < quant_floor_bytes(cfg.quant_block, s.size, e))
    return void(p.quant_why = "exact: below one block per rank (HIER_QUANT_BLOCK)");
  p.quant_ns = quant_cost(call.coll, call.bytes, e, s, m, bits, cfg.quant_block);
  const double exact = p.algo == sched::Algorithm::Flat ? p.flat_ns : p.hier_ns;
  // HIER_ALGO=hier takes the choice from the model: libhier's schedule, quantized where allowed
  // (on one machine, where the levels are fakes, the model would cost the "network" as memory).
  if (cfg.algo_for(call.coll) == config::Algo::Hier && p.quant_ns > 0) {
    p.quant_bits = bits;
    p.quant_why = bits == 8 ? "int8 chosen: HIER_ALGO=hier" : "int4 chosen: HIER_ALGO=hier";
  } else if (p.quant_ns > 0 && p.quant_ns < exact) {
    p.quant_bits = bits;
    p.quant_why = bits == 8 ? "int8 chosen: cheaper by the model" : "int4 chosen: cheaper by the model";
  } else {
    p.quant_why = "exact kept: cheaper by the model";
  }
}

}  // namespace hier::model
