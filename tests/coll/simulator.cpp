#include "simulator.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <sstream>

#include "quant/quant.hpp"

namespace coll_test {

using hier::sched::Buf;
using hier::sched::Kind;
using hier::sched::On;
using hier::sched::Ref;
using hier::sched::Step;

std::vector<int> members(const hier::topo::Shape& s, int rank, const hier::sched::CommRef& c) {
  using C = hier::topo::Shape::Comm;
  switch (c.on) {
    case On::Step: return s.members(rank, C::Step, c.level);
    case On::Node: return s.members(rank, C::Node);
    case On::Cross: return s.members(rank, C::Cross);
    case On::Leaders: return s.members(rank, C::Leaders);
    case On::None: break;
  }
  return {};
}

namespace {

struct Sim {
  const hier::topo::Shape& s;
  const std::vector<hier::sched::Schedule>& sc;
  std::vector<RankData>& d;
  std::vector<std::vector<int64_t>> scratch, records;
  std::string err;
  bool doubles = false;  // quantized schedules: values are float64 bit patterns

  std::vector<int64_t>& buf(int r, Buf b) {
    return b == Buf::Send ? d[r].send : b == Buf::Recv ? d[r].recv : b == Buf::Records ? records[r] : scratch[r];
  }
  // The sum of two values: int64, or float64 in quantized schedules.
  int64_t add(int64_t a, int64_t b) const {
    return doubles ? std::bit_cast<int64_t>(std::bit_cast<double>(a) + std::bit_cast<double>(b)) : a + b;
  }
  std::vector<unsigned char> bytes_of(int r, const Ref& ref, int64_t n) {
    const int64_t* p = at(r, ref, n);
    std::vector<unsigned char> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(p[i]);
    return v;
  }
  void quant_step(int r, const Step& st) {
    const auto& sc_r = sc[r];
    const int64_t n = st.count, B = sc_r.quant_block;
    const int bits = sc_r.quant_bits;
    if (n <= 0) return;
    const int64_t rec = hier::quant::quantized_bytes(n, B, bits);
    std::vector<double> x(static_cast<size_t>(n));
    if (st.kind == Kind::Quantize) {
      no_alias(r, st.src, n, st.dst, rec);
      const int64_t* p = at(r, st.src, n);
      for (int64_t i = 0; i < n; ++i) x[i] = std::bit_cast<double>(p[i]);
      std::vector<unsigned char> out(static_cast<size_t>(rec));
      hier::quant::quantize(x.data(), n, B, bits, out.data());
      int64_t* q = at(r, st.dst, rec);
      for (int64_t i = 0; i < rec; ++i) q[i] = out[i];
      return;
    }
    if (st.kind == Kind::Dequantize) {
      const auto in = bytes_of(r, st.src, rec);
      hier::quant::dequantize(in.data(), n, B, bits, x.data());
    } else {  // DequantizeReduce: the parts summed in order 0..parts-1 into zeros
      std::fill(x.begin(), x.end(), 0.0);
      for (int k = 0; k < st.parts; ++k) {
        const auto in = bytes_of(r, Ref{st.src.buf, st.src.off + k * st.part_bytes}, rec);
        hier::quant::dequantize_add(in.data(), n, B, bits, x.data());
      }
    }
    int64_t* out = at(r, st.dst, n);
    for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<int64_t>(x[i]);
  }
  // A checked view of [ref.off, ref.off + n) on rank r.
  int64_t* at(int r, const Ref& ref, int64_t n) {
    auto& v = buf(r, ref.buf);
    if (ref.off < 0 || n < 0 || ref.off + n > static_cast<int64_t>(v.size())) {
      fail(r, "range " + hier::sched::to_string(ref) + " +" + std::to_string(n) + " outside buffer of " +
                  std::to_string(v.size()));
      static int64_t dummy[1 << 16];
      return dummy;
    }
    return v.data() + ref.off;
  }
  void fail(int r, const std::string& m) {
    if (err.empty()) err = "rank " + std::to_string(r) + ": " + m;
  }
  void no_alias(int r, const Ref& a, int64_t na, const Ref& b, int64_t nb) {
    if (a.buf == b.buf && a.off < b.off + nb && b.off < a.off + na && na > 0 && nb > 0)
      fail(r, "source " + hier::sched::to_string(a) + " and destination " + hier::sched::to_string(b) + " overlap");
  }

  void local(int r, const Step& st) {
    if (st.kind == Kind::Copy) {
      no_alias(r, st.src, st.count, st.dst, st.count);
      std::copy_n(at(r, st.src, st.count), st.count, at(r, st.dst, st.count));
    } else if (st.kind == Kind::LoadBlock) {
      auto& b = d[r].send_blocks.at(st.block);
      if (static_cast<int64_t>(b.size()) != st.count) fail(r, "load_block size");
      std::copy_n(b.data(), std::min<int64_t>(st.count, b.size()), at(r, st.dst, st.count));
    } else if (st.kind == Kind::StoreBlock) {
      auto& b = d[r].recv_blocks.at(st.block);
      b.assign(at(r, st.src, st.count), at(r, st.src, st.count) + st.count);
    } else {
      quant_step(r, st);
    }
  }

  // One collective over members m (m[i] runs steps[i]).
  void collective(const std::vector<int>& m, const std::vector<const Step*>& steps) {
    const Step& f = *steps[0];
    const int k = static_cast<int>(m.size());
    for (int i = 1; i < k; ++i) {
      const Step& o = *steps[i];
      // MPI never matches a nonblocking collective (a pipelined wave's) with a blocking one.
      if ((o.wave >= 0) != (f.wave >= 0))
        return fail(m[i], std::string("mismatch with rank ") + std::to_string(m[0]) + ": blocking and nonblocking " +
                              hier::sched::to_string(f.kind));
      if (f.kind == Kind::Alltoallv) {  // what member i sends member j is what j expects from i
        if (o.kind != f.kind) return fail(m[i], "mismatch in alltoallv");
        continue;
      }
      if (o.kind != f.kind || o.root != f.root || o.counts != f.counts || o.displs != f.displs ||
          (f.kind != Kind::Gatherv && f.kind != Kind::Scatterv && f.kind != Kind::Reduce && o.count != f.count &&
           f.kind != Kind::Allgatherv && f.kind != Kind::ReduceScatter))
        return fail(m[i], std::string("mismatch with rank ") + std::to_string(m[0]) + " in " + hier::sched::to_string(f.kind));
    }
    auto displ_of = [&](int j) {
      int64_t o = 0;
      for (int q = 0; q < j; ++q) o += f.counts[q];
      return o;
    };
    switch (f.kind) {
      case Kind::Barrier: break;
      case Kind::ReduceScatter: {
        int64_t total = 0;
        for (int64_t c : f.counts) total += c;
        std::vector<int64_t> sum(total, 0);
        for (int i = 0; i < k; ++i) {
          const int64_t* p = at(m[i], steps[i]->src, total);
          for (int64_t x = 0; x < total; ++x) sum[x] = add(sum[x], p[x]);
        }
        for (int j = 0; j < k; ++j) {
          no_alias(m[j], steps[j]->src, total, steps[j]->dst, f.counts[j]);
          std::copy_n(sum.data() + displ_of(j), f.counts[j], at(m[j], steps[j]->dst, f.counts[j]));
        }
        break;
      }
      case Kind::Allreduce:
      case Kind::Reduce: {
        const bool all = f.kind == Kind::Allreduce;
        std::vector<int64_t> sum(f.count, 0);
        for (int i = 0; i < k; ++i) {
          if (steps[i]->in_place && f.kind == Kind::Reduce) return fail(m[i], "in-place reduce (MPICH 4.0.2 bug)");
          const int64_t* p = steps[i]->in_place ? at(m[i], steps[i]->dst, f.count) : at(m[i], steps[i]->src, f.count);
          for (int64_t x = 0; x < f.count; ++x) sum[x] = add(sum[x], p[x]);
        }
        for (int j = 0; j < k; ++j) {
          if (!all && j != f.root) continue;
          if (!steps[j]->in_place) no_alias(m[j], steps[j]->src, f.count, steps[j]->dst, f.count);
          std::copy(sum.begin(), sum.end(), at(m[j], steps[j]->dst, f.count));
        }
        break;
      }
      case Kind::Allgather:
      case Kind::Allgatherv: {
        const bool v = f.kind == Kind::Allgatherv;
        std::vector<std::vector<int64_t>> part(k);
        int64_t span = 0;
        for (int j = 0; j < k; ++j) {
          const int64_t n = v ? f.counts[j] : f.count, off = v ? f.displs[j] : j * f.count;
          span = std::max(span, off + n);
          const int64_t* p = steps[j]->in_place ? at(m[j], Ref{steps[j]->dst.buf, steps[j]->dst.off + off}, n)
                                                : at(m[j], steps[j]->src, n);
          part[j].assign(p, p + n);
        }
        for (int i = 0; i < k; ++i) {
          if (!steps[i]->in_place) no_alias(m[i], steps[i]->src, part[i].size(), steps[i]->dst, span);
          for (int j = 0; j < k; ++j) {
            const int64_t off = v ? f.displs[j] : j * f.count;
            std::copy(part[j].begin(), part[j].end(), at(m[i], Ref{steps[i]->dst.buf, steps[i]->dst.off + off}, part[j].size()));
          }
        }
        break;
      }
      case Kind::Bcast: {
        std::vector<int64_t> v(at(m[f.root], steps[f.root]->dst, f.count), at(m[f.root], steps[f.root]->dst, f.count) + f.count);
        for (int i = 0; i < k; ++i) std::copy(v.begin(), v.end(), at(m[i], steps[i]->dst, f.count));
        break;
      }
      case Kind::Scatterv: {
        const int r = f.root;
        for (int j = 0; j < k; ++j) {
          if (j == r && steps[r]->in_place) continue;
          const int64_t* p = at(m[r], Ref{steps[r]->src.buf, steps[r]->src.off + f.displs[j]}, f.counts[j]);
          std::vector<int64_t> v(p, p + f.counts[j]);
          std::copy(v.begin(), v.end(), at(m[j], steps[j]->dst, f.counts[j]));
        }
        break;
      }
      case Kind::Gatherv: {
        const int r = f.root;
        for (int j = 0; j < k; ++j) {
          if (j == r && steps[r]->in_place) continue;
          const int64_t* p = at(m[j], steps[j]->src, f.counts[j]);
          std::vector<int64_t> v(p, p + f.counts[j]);
          std::copy(v.begin(), v.end(), at(m[r], Ref{steps[r]->dst.buf, steps[r]->dst.off + f.displs[j]}, f.counts[j]));
        }
        break;
      }
      case Kind::Alltoall: {
        std::vector<std::vector<int64_t>> out(k, std::vector<int64_t>(k * f.count));
        for (int i = 0; i < k; ++i) {
          no_alias(m[i], steps[i]->src, k * f.count, steps[i]->dst, k * f.count);
          const int64_t* p = at(m[i], steps[i]->src, k * f.count);
          for (int j = 0; j < k; ++j) std::copy_n(p + j * f.count, f.count, out[j].data() + i * f.count);
        }
        for (int j = 0; j < k; ++j) std::copy(out[j].begin(), out[j].end(), at(m[j], steps[j]->dst, k * f.count));
        break;
      }
      case Kind::Alltoallv: {
        // Member i's piece for j: counts[j] at displs[j] of i's src, to rdispls[i] of j's dst.
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j)
            if (steps[i]->counts.at(j) != steps[j]->rcounts.at(i))
              return fail(m[j], "alltoallv: rank " + std::to_string(m[i]) + " sends " +
                                    std::to_string(steps[i]->counts[j]) + ", expected " +
                                    std::to_string(steps[j]->rcounts[i]));
        std::vector<std::vector<std::vector<int64_t>>> piece(k, std::vector<std::vector<int64_t>>(k));
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j) {
            const Step& a = *steps[i];
            const int64_t* p = at(m[i], Ref{a.src.buf, a.src.off + a.displs[j]}, a.counts[j]);
            piece[i][j].assign(p, p + a.counts[j]);
          }
        for (int j = 0; j < k; ++j)
          for (int i = 0; i < k; ++i) {
            const Step& b = *steps[j];
            std::copy(piece[i][j].begin(), piece[i][j].end(),
                      at(m[j], Ref{b.dst.buf, b.dst.off + b.rdispls[i]}, b.rcounts[i]));
          }
        break;
      }
      default: fail(m[0], "unexpected collective");
    }
  }

  // The ranges a step reads and writes on its rank (conservatively: a whole v-call's span).
  struct Access {
    Ref at;
    int64_t n;
    bool write;
  };
  std::vector<Access> accesses(int r, const Step& st) {
    std::vector<Access> a;
    auto rd = [&](const Ref& x, int64_t n) { a.push_back({x, n, false}); };
    auto wr = [&](const Ref& x, int64_t n) { a.push_back({x, n, true}); };
    int64_t total = 0, span = 0;
    for (size_t j = 0; j < st.counts.size(); ++j) {
      total += st.counts[j];
      span = std::max(span, (st.displs.empty() ? 0 : st.displs[j]) + st.counts[j]);
    }
    const auto m = st.comm.on == On::None ? std::vector<int>{} : members(s, r, st.comm);
    const int me = static_cast<int>(std::find(m.begin(), m.end(), r) - m.begin());
    const int64_t mine = me < static_cast<int>(st.counts.size()) ? st.counts[me] : 0;
    const int k = static_cast<int>(m.size());
    switch (st.kind) {
      case Kind::Copy: rd(st.src, st.count); wr(st.dst, st.count); break;
      case Kind::LoadBlock: wr(st.dst, st.count); break;
      case Kind::StoreBlock: rd(st.src, st.count); break;
      case Kind::ReduceScatter: rd(st.src, total); wr(st.dst, mine); break;
      case Kind::Allreduce:
      case Kind::Reduce:
        if (!st.in_place) rd(st.src, st.count);
        wr(st.dst, st.count);
        break;
      case Kind::Allgather: if (!st.in_place) rd(st.src, st.count); wr(st.dst, st.count * k); break;
      case Kind::Allgatherv: if (!st.in_place) rd(st.src, mine); wr(st.dst, span); break;
      case Kind::Bcast: wr(st.dst, st.count); break;
      case Kind::Scatterv: rd(st.src, span); wr(st.dst, mine); break;
      case Kind::Gatherv: rd(st.src, mine); wr(st.dst, span); break;
      case Kind::Alltoall: rd(st.src, st.count * k); wr(st.dst, st.count * k); break;
      case Kind::Send: rd(st.src, st.count); break;
      case Kind::Recv: wr(st.dst, st.count); break;
      case Kind::Barrier: break;
      case Kind::Alltoallv: {
        int64_t rspan = 0;
        for (size_t j = 0; j < st.rcounts.size(); ++j) rspan = std::max(rspan, st.rdispls[j] + st.rcounts[j]);
        rd(st.src, span);
        wr(st.dst, rspan);
        break;
      }
      case Kind::Quantize:
      case Kind::Dequantize:
      case Kind::DequantizeReduce: {
        const int64_t rec = hier::quant::quantized_bytes(st.count, sc[r].quant_block, sc[r].quant_bits);
        const bool q = st.kind == Kind::Quantize;
        rd(st.src, q ? st.count : st.kind == Kind::Dequantize ? rec : rec + (st.parts - 1) * st.part_bytes);
        wr(st.dst, q ? rec : st.count);
        break;
      }
    }
    return a;
  }
  // Steps of one wave run at once: none may write what another reads or writes.
  void check_waves(int r) {
    const auto& st = sc[r].steps;
    for (size_t i = 0; i < st.size();) {
      size_t j = i + 1;
      while (st[i].wave >= 0 && j < st.size() && st[j].wave == st[i].wave) ++j;
      for (size_t x = i; x < j; ++x)
        for (size_t y = x + 1; y < j; ++y)
          for (const Access& a : accesses(r, st[x]))
            for (const Access& b : accesses(r, st[y]))
              if ((a.write || b.write) && a.at.buf == b.at.buf && a.n > 0 && b.n > 0 && a.at.off < b.at.off + b.n &&
                  b.at.off < a.at.off + a.n)
                return fail(r, "wave " + std::to_string(st[x].wave) + ": " + hier::sched::to_string(st[x].kind) + " " +
                                   hier::sched::to_string(a.at) + " and " + hier::sched::to_string(st[y].kind) + " " +
                                   hier::sched::to_string(b.at) + " race");
      i = j;
    }
  }

  std::string run() {
    const int P = s.size;
    for (int r = 0; r < P; ++r) check_waves(r);
    if (!err.empty()) return err;
    scratch.resize(P);
    records.resize(P);
    for (int r = 0; r < P; ++r) {
      scratch[r].assign(sc[r].scratch, -999);
      records[r].assign(sc[r].records, 0xee);
      doubles = doubles || sc[r].quant_bits != 0;
    }
    std::vector<size_t> pc(P, 0);
    for (;;) {
      bool progress = false, done = true;
      for (int r = 0; r < P && err.empty(); ++r) {
        while (pc[r] < sc[r].steps.size()) {
          const Step& st = sc[r].steps[pc[r]];
          if (st.comm.on != On::None) break;
          local(r, st);
          ++pc[r];
          progress = true;
        }
      }
      if (!err.empty()) return err;
      // Point to point: a send whose peer waits in the matching receive.
      for (int r = 0; r < P; ++r) {
        if (pc[r] >= sc[r].steps.size()) continue;
        done = false;
        const Step& st = sc[r].steps[pc[r]];
        if (st.kind != Kind::Send) continue;
        const auto m = members(s, r, st.comm);
        const int peer = m.at(st.root);
        if (pc[peer] >= sc[peer].steps.size()) continue;
        const Step& rv = sc[peer].steps[pc[peer]];
        const int me = static_cast<int>(std::find(m.begin(), m.end(), r) - m.begin());
        if (rv.kind != Kind::Recv || rv.root != me || !(rv.comm == st.comm) || rv.count != st.count) continue;
        std::copy_n(at(r, st.src, st.count), st.count, at(peer, rv.dst, rv.count));
        ++pc[r];
        ++pc[peer];
        progress = true;
      }
      // Collectives: every member of the communicator is at a collective on it.
      for (int r = 0; r < P && err.empty(); ++r) {
        if (pc[r] >= sc[r].steps.size()) continue;
        const Step& st = sc[r].steps[pc[r]];
        if (st.comm.on == On::None || st.kind == Kind::Send || st.kind == Kind::Recv) continue;
        const auto m = members(s, r, st.comm);
        if (m.empty()) return "rank " + std::to_string(r) + ": not a member of " + hier::sched::to_string(st.comm);
        std::vector<const Step*> steps;
        for (int q : m) {
          if (pc[q] >= sc[q].steps.size()) break;
          const Step& o = sc[q].steps[pc[q]];
          if (!(o.comm == st.comm) || members(s, q, o.comm) != m) break;
          steps.push_back(&o);
        }
        if (steps.size() != m.size()) continue;
        collective(m, steps);
        for (int q : m) ++pc[q];
        progress = true;
      }
      if (!err.empty()) return err;
      if (done) return "";
      if (!progress) {
        std::ostringstream o;
        o << "deadlock:";
        for (int r = 0; r < P; ++r)
          if (pc[r] < sc[r].steps.size())
            o << " rank " << r << " at " << hier::sched::to_string(sc[r].steps[pc[r]].kind) << " on "
              << hier::sched::to_string(sc[r].steps[pc[r]].comm) << ';';
        return o.str();
      }
    }
  }
};

}  // namespace

std::string simulate(const hier::topo::Shape& s, const std::vector<hier::sched::Schedule>& scheds,
                     std::vector<RankData>& data) {
  Sim sim{s, scheds, data, {}, {}, {}, false};
  return sim.run();
}

}  // namespace coll_test
