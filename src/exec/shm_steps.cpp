#include "exec/shm_steps.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/hooks.hpp"
#include "shm/cma.hpp"
#include "shm/wait.hpp"

namespace hier::exec {
namespace {

using sched::Kind;

// Report: steps run through shared memory, per kind, and the rounds they took.
constexpr size_t kKinds = static_cast<size_t>(Kind::DequantizeReduce) + 1;
std::array<std::atomic<uint64_t>, kKinds> g_steps{}, g_single{};
std::atomic<uint64_t> g_rounds{0};
std::atomic<uint64_t> g_refused{0};  // single-copy steps run copy-in: the kernel refused it on the segment
std::atomic<uint64_t> g_not_dense{0};  // single-copy reduce steps run copy-in: a type with gaps
// Steps the plan routed through a segment that ran as messages: no segment on the communicator,
// or the transport declined the inputs (exec/executor.cpp: note_shm_fallback).
std::atomic<uint64_t> g_no_segment{0}, g_declined{0};

std::string report() {
  nlohmann::json j = nlohmann::json::object();
  nlohmann::json steps = nlohmann::json::object();
  for (size_t k = 0; k < kKinds; ++k)
    if (const uint64_t n = g_steps[k].load()) steps[sched::to_string(static_cast<Kind>(k))] = n;
  j["steps"] = steps;
  nlohmann::json single = nlohmann::json::object();  // of which single copy (shm/cma.hpp)
  for (size_t k = 0; k < kKinds; ++k)
    if (const uint64_t n = g_single[k].load()) single[sched::to_string(static_cast<Kind>(k))] = n;
  j["single_copy"] = single;
  if (const uint64_t n = g_refused.load()) j["single_copy_refused"] = n;
  if (const uint64_t n = g_not_dense.load()) j["single_copy_not_dense"] = n;
  if (const uint64_t n = g_no_segment.load()) j["fallback_no_segment"] = n;
  if (const uint64_t n = g_declined.load()) j["fallback_declined"] = n;
  const shm::WaitCounts w = shm::wait_counts();
  j["waiting"] = {{"spins", w.spins}, {"yields", w.yields}, {"naps", w.naps}};
  j["rounds"] = g_rounds.load();
  return j.dump();
}

void register_report() {
  static const bool registered = (base::add_report_section("shm", report), true);
  (void)registered;
}

void count(Kind k, uint64_t rounds, bool single) {
  register_report();
  g_steps[static_cast<size_t>(k)].fetch_add(1, std::memory_order_relaxed);
  g_rounds.fetch_add(rounds, std::memory_order_relaxed);
  if (single) g_single[static_cast<size_t>(k)].fetch_add(1, std::memory_order_relaxed);
}

// The units a step moves: elements of a type (laid out in a slot as in the user's buffer,
// element 0 at slot - true_lb), or bytes.
struct Units {
  const TypeInfo* t = nullptr;
  MPI_Aint ext = 1, lb = 0, tex = 1;
  explicit Units(const TypeInfo* info) : t(info) {
    if (t) ext = t->extent, lb = t->true_lb, tex = t->true_extent;
  }
  // The most elements whose span fits `cap` bytes (0: not even one).
  int64_t fit(int64_t cap) const { return cap < tex ? 0 : (cap - tex) / ext + 1; }
  int64_t span(int64_t n) const { return n <= 0 ? 0 : (n - 1) * ext + tex; }
  int copy(const char* from, char* to, int64_t n) const {
    if (n <= 0 || from == to) return MPI_SUCCESS;
    if (t) return typed_copy(from, to, n, *t);
    std::memcpy(to, from, static_cast<size_t>(n));
    return MPI_SUCCESS;
  }
};

// The part of a piece of `c` units that round r covers, m units per round.
int64_t part(int64_t c, uint64_t r, int64_t m) { return std::clamp<int64_t>(c - static_cast<int64_t>(r) * m, 0, m); }

int64_t rounds_for(int64_t most, int64_t m) { return std::max<int64_t>(1, (most + m - 1) / m); }

// The round protocol (shm/segment.hpp) shared by every kind: writers fill their slot's half
// once every member is done with the round that used it last; readers wait for the writers they
// read.
class Rounds : public shm::Step {
 public:
  bool is_single_copy() const { return single_copy(); }  // (shm_single_copy)
  Rounds(shm::Segment& seg, Kind kind, int64_t n)
      : Step(seg), kind_(kind), n_(static_cast<uint64_t>(n)), first_(seg.take_rounds(static_cast<uint64_t>(n))),
        me_(seg.me()), p_(seg.members()) {}

 protected:
  virtual bool writes(int m) const { (void)m; return true; }
  virtual bool waits_for(int m) const { return m != me_ && writes(m); }
  virtual int produce(uint64_t r, char* mine) { (void)r, (void)mine; return MPI_SUCCESS; }
  virtual int consume(uint64_t r, uint64_t round) { (void)r, (void)round; return MPI_SUCCESS; }
  // Single-copy steps read (or write) the peers' own buffers: a member whose buffers others
  // touch must not leave the step (and hand them back to the program) before every member is
  // done with them; then release().
  virtual bool single_copy() const { return false; }
  virtual bool holds() const { return single_copy(); }
  virtual int release() { return MPI_SUCCESS; }
  char* slot(int m, uint64_t round) const { return seg_.slot(m, round); }

  bool poll() override {
    while (r_ < n_) {
      const uint64_t t = first_ + r_;
      if (!produced_) {
        if (writes(me_)) {
          if (!seg_.all_done(t >= 2 ? t - 2 : 0)) return false;
          if (rc_ == MPI_SUCCESS) rc_ = produce(r_, seg_.slot(me_, t));
        }
        seg_.raise(seg_.ready(me_), t);
        produced_ = true;
      }
      for (int m = 0; m < p_; ++m)
        if (waits_for(m) && seg_.ready(m).load(std::memory_order_acquire) < t) return false;
      if (rc_ == MPI_SUCCESS) rc_ = consume(r_, t);
      seg_.raise(seg_.done(me_), t);
      produced_ = false;
      ++r_;
    }
    if (!released_) {
      if (holds() && !seg_.all_done(first_ + n_ - 1)) return false;
      if (rc_ == MPI_SUCCESS) rc_ = release();
      released_ = true;
    }
    if (!counted_) count(kind_, n_, single_copy()), counted_ = true;
    return true;
  }

  const Kind kind_;
  const uint64_t n_, first_;
  const int me_, p_;

 private:
  uint64_t r_ = 0;
  bool produced_ = false, counted_ = false, released_ = false;
};

// Member i ends with the reduction of every member's piece i. Each member copies the pieces of
// the others into its slot (its own is read where it is); member i then folds piece i of every
// slot into its own, in the direct exchange's order.
class ReduceScatter final : public Rounds {
 public:
  ReduceScatter(shm::Segment& seg, const ShmArgs& a, int64_t m, int64_t pb, int64_t rounds)
      : Rounds(seg, Kind::ReduceScatter, rounds), a_(a), u_(a.info), m_(m), pb_(pb), displs_(a.counts.size(), 0) {
    for (size_t i = 1; i < displs_.size(); ++i) displs_[i] = displs_[i - 1] + a.counts[i - 1];
  }

 private:
  const char* piece(int i, uint64_t r) const { return a_.src + (displs_[i] + static_cast<int64_t>(r) * m_) * u_.ext; }
  int produce(uint64_t r, char* mine) override {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < p_ && rc == MPI_SUCCESS; ++i)
      if (i != me_) rc = u_.copy(piece(i, r), mine + i * pb_ - u_.lb, part(a_.counts[i], r, m_));
    return rc;
  }
  int consume(uint64_t r, uint64_t round) override {
    const int64_t n = part(a_.counts[me_], r, m_);
    if (n <= 0) return MPI_SUCCESS;
    char* acc = a_.dst + static_cast<int64_t>(r) * m_ * u_.ext;
    int rc = u_.copy(piece(me_, r), acc, n);
    for (int k = 1; k < p_ && rc == MPI_SUCCESS; ++k)
      rc = reduce_local(slot((me_ - k + p_) % p_, round) + me_ * pb_ - u_.lb, acc, static_cast<int>(n),
                             u_.t->type, a_.op);
    return rc;
  }
  const ShmArgs a_;
  const Units u_;
  const int64_t m_, pb_;
  std::vector<int64_t> displs_;
};

// The address a single-copy step publishes in its member's slot half (the round's only data).
void publish(char* mine, const char* addr) {
  const auto v = reinterpret_cast<uint64_t>(addr);
  std::memcpy(mine, &v, sizeof v);
}
const char* published(const char* slot) {
  uint64_t v = 0;
  std::memcpy(&v, slot, sizeof v);
  return reinterpret_cast<const char*>(v);
}

// Elements a single-copy step reads from a peer per kernel call: small enough that the chunk
// and the sums it folds into stay in the cache between the read and the fold.
constexpr int64_t kSingleChunkBytes = int64_t{128} << 10;

// Single copy (Segment::cma(), shm/cma.hpp): one round in which every member publishes the
// address of its input; member i then reads piece i of every other member's input through the
// kernel, a chunk at a time, into its scratch and folds it into its output, in the copy-in
// form's order (own, i-1, i-2, ...): the same bits, with one copy per byte instead of two and
// one round instead of one per slot's fill. A member keeps its input as it is until every
// member is done reading (holds()). Where the output overlaps the input (in place), the sums
// gather in a private buffer, copied to the output once the peers are done.
class ReduceScatterSingle final : public Rounds {
 public:
  ReduceScatterSingle(shm::Segment& seg, const ShmArgs& a)
      : Rounds(seg, Kind::ReduceScatter, 1), a_(a), u_(a.info), displs_(a.counts.size(), 0) {
    for (size_t i = 1; i < displs_.size(); ++i) displs_[i] = displs_[i - 1] + a.counts[i - 1];
  }

 private:
  const char* in() const { return a_.in_place ? a_.dst : a_.src; }
  bool single_copy() const override { return true; }
  int produce(uint64_t, char* mine) override {
    publish(mine, in());
    return MPI_SUCCESS;
  }
  int consume(uint64_t, uint64_t round) override {
    const int64_t n = a_.counts[me_];
    if (n <= 0) return MPI_SUCCESS;
    const int64_t total = displs_.back() + a_.counts.back();
    const char* in_lo = in() + u_.lb;
    const char* in_hi = in_lo + u_.span(total);
    char* out = a_.dst;
    if (out + u_.lb < in_hi && in_lo < out + u_.lb + u_.span(n)) {
      private_.resize(static_cast<size_t>(u_.span(n)));
      out = private_.data() - u_.lb;
    }
    const int64_t chunk = std::max<int64_t>(1, u_.fit(kSingleChunkBytes));
    std::vector<char>& tmp = seg_.scratch();
    tmp.resize(static_cast<size_t>(u_.span(std::min(chunk, n))));
    int rc = MPI_SUCCESS;
    for (int64_t off = 0; off < n && rc == MPI_SUCCESS; off += chunk) {
      const int64_t k = std::min(chunk, n - off);
      const int64_t at = (displs_[me_] + off) * u_.ext;  // in every member's input
      char* acc = out + off * u_.ext;
      rc = u_.copy(in() + at, acc, k);
      for (int d = 1; d < p_ && rc == MPI_SUCCESS; ++d) {
        const int j = (me_ - d + p_) % p_;
        if (!shm::cma_read(seg_.pid(j), published(slot(j, round)) + at + u_.lb, tmp.data(), static_cast<size_t>(u_.span(k))))
          rc = MPI_ERR_OTHER;
        else
          rc = reduce_local(tmp.data() - u_.lb, acc, static_cast<int>(k), u_.t->type, a_.op);
      }
    }
    return rc;
  }
  int release() override {
    if (private_.empty()) return MPI_SUCCESS;
    return u_.copy(private_.data() - u_.lb, a_.dst, a_.counts[me_]);
  }
  const ShmArgs a_;
  const Units u_;
  std::vector<int64_t> displs_;
  std::vector<char> private_;
};

// Reads n elements at `remote` in member `from`'s memory into `local` through the kernel: straight
// where the elements are plain bytes, otherwise a chunk at a time through the scratch, so that
// the gaps of a derived type in `local` are not written.
int read_elements(shm::Segment& seg, int from, const char* remote, char* local, int64_t n, const Units& u) {
  if (n <= 0) return MPI_SUCCESS;
  if (!u.t || u.t->dense)
    return shm::cma_read(seg.pid(from), remote, local, static_cast<size_t>(u.span(n))) ? MPI_SUCCESS : MPI_ERR_OTHER;
  const int64_t chunk = std::max<int64_t>(1, u.fit(kSingleChunkBytes));
  std::vector<char>& tmp = seg.scratch();
  tmp.resize(static_cast<size_t>(u.span(std::min(chunk, n))));
  int rc = MPI_SUCCESS;
  for (int64_t off = 0; off < n && rc == MPI_SUCCESS; off += chunk) {
    const int64_t k = std::min(chunk, n - off);
    if (!shm::cma_read(seg.pid(from), remote + off * u.ext + u.lb, tmp.data(), static_cast<size_t>(u.span(k))))
      rc = MPI_ERR_OTHER;
    else
      rc = u.copy(tmp.data() - u.lb, local + off * u.ext, k);
  }
  return rc;
}

// Single copy: every member puts its own piece in place in its output and publishes the
// output's address; each then reads every other member's piece from that member's output
// through the kernel, straight into its own output where the elements are plain bytes
// (otherwise a chunk at a time through its scratch, so that the gaps of a derived type are not
// written), starting at the next member so that the readers spread over the owners.
class AllgatherSingle final : public Rounds {
 public:
  AllgatherSingle(shm::Segment& seg, Kind kind, const ShmArgs& a) : Rounds(seg, kind, 1), a_(a), u_(a.info) {}

 private:
  char* at(int i) const { return a_.dst + a_.displs[i] * u_.ext; }
  bool single_copy() const override { return true; }
  int produce(uint64_t, char* mine) override {
    publish(mine, a_.dst);
    return a_.in_place ? MPI_SUCCESS : u_.copy(a_.src, at(me_), a_.counts[me_]);
  }
  int consume(uint64_t, uint64_t round) override {
    int rc = MPI_SUCCESS;
    for (int d = 1; d < p_ && rc == MPI_SUCCESS; ++d) {
      const int i = (me_ + d) % p_;
      rc = read_elements(seg_, i, published(slot(i, round)) + a_.displs[i] * u_.ext, at(i), a_.counts[i], u_);
    }
    return rc;
  }
  const ShmArgs a_;
  const Units u_;
};

// Every member's piece (counts / displs in dst) to every member: each copies its own in, then
// the others' out.
class Allgather final : public Rounds {
 public:
  Allgather(shm::Segment& seg, Kind kind, const ShmArgs& a, int64_t m, int64_t rounds)
      : Rounds(seg, kind, rounds), a_(a), u_(a.info), m_(m) {}

 private:
  char* at(int i, uint64_t r) const { return a_.dst + (a_.displs[i] + static_cast<int64_t>(r) * m_) * u_.ext; }
  int produce(uint64_t r, char* mine) override {
    const int64_t n = part(a_.counts[me_], r, m_);
    const char* from = a_.in_place ? at(me_, r) : a_.src + static_cast<int64_t>(r) * m_ * u_.ext;
    int rc = u_.copy(from, mine - u_.lb, n);
    if (rc == MPI_SUCCESS && !a_.in_place) rc = u_.copy(from, at(me_, r), n);
    return rc;
  }
  int consume(uint64_t r, uint64_t round) override {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < p_ && rc == MPI_SUCCESS; ++i)
      if (i != me_) rc = u_.copy(slot(i, round) - u_.lb, at(i, r), part(a_.counts[i], r, m_));
    return rc;
  }
  const ShmArgs a_;
  const Units u_;
  const int64_t m_;
};

// The root's dst to every member's dst.
class Bcast final : public Rounds {
 public:
  Bcast(shm::Segment& seg, const ShmArgs& a, int64_t m, int64_t rounds)
      : Rounds(seg, Kind::Bcast, rounds), a_(a), u_(a.info), m_(m) {}

 private:
  bool writes(int m) const override { return m == a_.root; }
  char* at(uint64_t r) const { return a_.dst + static_cast<int64_t>(r) * m_ * u_.ext; }
  int produce(uint64_t r, char* mine) override { return u_.copy(at(r), mine - u_.lb, part(a_.count, r, m_)); }
  int consume(uint64_t r, uint64_t round) override {
    return me_ == a_.root ? MPI_SUCCESS : u_.copy(slot(a_.root, round) - u_.lb, at(r), part(a_.count, r, m_));
  }
  const ShmArgs a_;
  const Units u_;
  const int64_t m_;
};

// Single copy: the root publishes its buffer's address and every other member reads it through
// the kernel straight into its own (read_elements); the root keeps its buffer until every member
// is done. One copy per byte instead of two, one round instead of one per slot's half.
class BcastSingle final : public Rounds {
 public:
  BcastSingle(shm::Segment& seg, const ShmArgs& a) : Rounds(seg, Kind::Bcast, 1), a_(a), u_(a.info) {}

 private:
  bool single_copy() const override { return true; }
  bool holds() const override { return me_ == a_.root; }
  bool writes(int m) const override { return m == a_.root; }
  int produce(uint64_t, char* mine) override {
    publish(mine, a_.dst);
    return MPI_SUCCESS;
  }
  int consume(uint64_t, uint64_t round) override {
    if (me_ == a_.root) return MPI_SUCCESS;
    return read_elements(seg_, a_.root, published(slot(a_.root, round)), a_.dst, a_.count, u_);
  }
  const ShmArgs a_;
  const Units u_;
};

// Single copy, plain-byte elements only (a type with gaps stays copy-in: the sums are written
// back as spans, which would overwrite the root's gaps): the root publishes the addresses of its
// input and its output, the others their input's. Member i reduces piece i of the vector (XHC's
// idea: the readers fold, each its piece, into the root's buffer): its chunk of the root's input,
// then of members root-1, root-2, ... (the copy-in form's order: the same bits), read through the
// kernel a chunk at a time, and writes the sums into the root's output (process_vm_writev; the
// root's own piece in place). Every member keeps its buffers until every member is done.
class ReduceSingle final : public Rounds {
 public:
  ReduceSingle(shm::Segment& seg, const ShmArgs& a) : Rounds(seg, Kind::Reduce, 1), a_(a), u_(a.info) {}

 private:
  const char* in() const { return a_.in_place ? a_.dst : a_.src; }
  bool single_copy() const override { return true; }
  int produce(uint64_t, char* mine) override {
    publish(mine, in());
    if (me_ == a_.root) publish(mine + sizeof(uint64_t), a_.dst);
    return MPI_SUCCESS;
  }
  int consume(uint64_t, uint64_t round) override {
    const int64_t first = a_.count * me_ / p_, n = a_.count * (me_ + 1) / p_ - first;
    if (n <= 0) return MPI_SUCCESS;
    const bool root = me_ == a_.root;
    const char* root_in = published(slot(a_.root, round));
    char* root_out = const_cast<char*>(published(slot(a_.root, round) + sizeof(uint64_t)));
    const int64_t chunk = std::max<int64_t>(1, u_.fit(kSingleChunkBytes));
    std::vector<char>& tmp = seg_.scratch();
    tmp.resize(static_cast<size_t>(u_.span(std::min(chunk, n))));
    if (!root) acc_.resize(tmp.size());
    int rc = MPI_SUCCESS;
    for (int64_t off = first; off < first + n && rc == MPI_SUCCESS; off += chunk) {
      const int64_t k = std::min(chunk, first + n - off);
      const int64_t at = off * u_.ext;
      const size_t bytes = static_cast<size_t>(u_.span(k));
      char* acc = root ? a_.dst + at : acc_.data();
      if (root) rc = u_.copy(in() + at, acc, k);
      else if (!shm::cma_read(seg_.pid(a_.root), root_in + at, acc, bytes)) rc = MPI_ERR_OTHER;
      for (int d = 1; d < p_ && rc == MPI_SUCCESS; ++d) {
        const int j = (a_.root - d + p_) % p_;
        const char* x = in() + at;
        if (j != me_) {
          if (!shm::cma_read(seg_.pid(j), published(slot(j, round)) + at, tmp.data(), bytes)) rc = MPI_ERR_OTHER;
          x = tmp.data();
        }
        if (rc == MPI_SUCCESS) rc = reduce_local(x, acc, static_cast<int>(k), u_.t->type, a_.op);
      }
      if (rc == MPI_SUCCESS && !root && !shm::cma_write(seg_.pid(a_.root), root_out + at, acc, bytes)) rc = MPI_ERR_OTHER;
    }
    return rc;
  }
  const ShmArgs a_;
  const Units u_;
  std::vector<char> acc_;  // the sums of a chunk, before they go to the root
};

// Reduce (to the root: its own, then root-1, root-2, ...) and allreduce (every member folds
// members 0..p-1, so every member computes the same bits).
class Reduce final : public Rounds {
 public:
  Reduce(shm::Segment& seg, const ShmArgs& a, bool all, int64_t m, int64_t rounds)
      : Rounds(seg, all ? Kind::Allreduce : Kind::Reduce, rounds), a_(a), u_(a.info), all_(all), m_(m) {}

 private:
  bool writes(int m) const override { return all_ || m != a_.root; }
  bool waits_for(int m) const override { return m != me_ && (all_ || (me_ == a_.root && m != a_.root)); }
  char* at(uint64_t r) const { return a_.dst + static_cast<int64_t>(r) * m_ * u_.ext; }
  const char* from(uint64_t r) const { return a_.in_place ? at(r) : a_.src + static_cast<int64_t>(r) * m_ * u_.ext; }
  int produce(uint64_t r, char* mine) override { return u_.copy(from(r), mine - u_.lb, part(a_.count, r, m_)); }
  int consume(uint64_t r, uint64_t round) override {
    const int n = static_cast<int>(part(a_.count, r, m_));
    if (n <= 0 || (!all_ && me_ != a_.root)) return MPI_SUCCESS;
    char* acc = at(r);
    auto in = [&](int j) { return slot(j, round) - u_.lb; };
    int rc = MPI_SUCCESS;
    if (all_) {
      rc = u_.copy(in(0), acc, n);
      for (int j = 1; j < p_ && rc == MPI_SUCCESS; ++j) rc = reduce_local(in(j), acc, n, u_.t->type, a_.op);
      return rc;
    }
    rc = u_.copy(from(r), acc, n);
    for (int k = 1; k < p_ && rc == MPI_SUCCESS; ++k)
      rc = reduce_local(in((a_.root - k + p_) % p_), acc, n, u_.t->type, a_.op);
    return rc;
  }
  const ShmArgs a_;
  const Units u_;
  const bool all_;
  const int64_t m_;
};

class Barrier final : public Rounds {
 public:
  explicit Barrier(shm::Segment& seg) : Rounds(seg, Kind::Barrier, 1) {}
};

// Whether a step the plan made single copy (ShmArgs::single_copy: Step::single, chosen by
// model::shm_single) runs so: where every member can read the others' memory (Segment::cma(),
// agreed when the segment was built: the same on every member); else copy-in, counted.
bool single_copy(const shm::Segment& seg, const ShmArgs& a) {
  if (!a.single_copy) return false;
  if (!seg.cma()) g_refused.fetch_add(1, std::memory_order_relaxed);
  return seg.cma();
}

bool commutative(MPI_Op op) {
  if (op == MPI_OP_NULL || op == MPI_REPLACE || op == MPI_NO_OP) return false;
  int c = 0;
  return PMPI_Op_commutative(op, &c) == MPI_SUCCESS && c;
}

}  // namespace

ShmCounts shm_counts() {
  ShmCounts c;
  for (size_t k = 0; k < kKinds; ++k) c.steps += g_steps[k].load(), c.single += g_single[k].load();
  c.single_refused = g_refused.load();
  c.not_dense = g_not_dense.load();
  c.no_segment = g_no_segment.load();
  c.declined = g_declined.load();
  return c;
}

void note_shm_fallback(ShmFallback why) {
  register_report();
  (why == ShmFallback::NoSegment ? g_no_segment : g_declined).fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<shm::Step> shm_start(Kind kind, shm::Segment& seg, const ShmArgs& a) {
  const int p = seg.members();
  const Units u(a.info);
  const int64_t half = seg.half_bytes();
  const bool reduces = kind == Kind::ReduceScatter || kind == Kind::Allreduce || kind == Kind::Reduce;
  if (reduces && (!a.info || !commutative(a.op))) return nullptr;
  switch (kind) {
    case Kind::ReduceScatter: {
      if (static_cast<int>(a.counts.size()) != p) return nullptr;
      const int64_t cap = half / p / 64 * 64;  // a slot's half holds one part of every piece
      const int64_t m = u.fit(cap);
      if (m <= 0) return nullptr;
      const int64_t most = *std::max_element(a.counts.begin(), a.counts.end());
      if (single_copy(seg, a)) return std::make_unique<ReduceScatterSingle>(seg, a);
      if (a.in_place) return nullptr;  // the copy-in form reads src (no schedule asks in place)
      return std::make_unique<ReduceScatter>(seg, a, m, cap, rounds_for(most, m));
    }
    case Kind::Allgather:
    case Kind::Allgatherv: {
      ShmArgs v = a;
      if (kind == Kind::Allgather) {
        v.counts.assign(p, a.count);
        v.displs.resize(p);
        for (int i = 0; i < p; ++i) v.displs[i] = i * a.count;
      }
      if (static_cast<int>(v.counts.size()) != p || static_cast<int>(v.displs.size()) != p) return nullptr;
      const int64_t m = u.fit(half);
      if (m <= 0) return nullptr;
      const int64_t most = *std::max_element(v.counts.begin(), v.counts.end());
      if (single_copy(seg, v)) return std::make_unique<AllgatherSingle>(seg, kind, v);
      return std::make_unique<Allgather>(seg, kind, v, m, rounds_for(most, m));
    }
    case Kind::Bcast:
    case Kind::Reduce:
    case Kind::Allreduce: {
      const int64_t m = u.fit(half);
      if (m <= 0) return nullptr;
      // Single copy: bcast of any type, reduce of plain-byte elements (ReduceSingle says why;
      // a reduce of a type with gaps runs copy-in, counted).
      if (a.single_copy && kind == Kind::Reduce && !u.t->dense) {
        g_not_dense.fetch_add(1, std::memory_order_relaxed);
      } else if (kind != Kind::Allreduce && single_copy(seg, a)) {
        if (kind == Kind::Bcast) return std::make_unique<BcastSingle>(seg, a);
        return std::make_unique<ReduceSingle>(seg, a);
      }
      if (kind == Kind::Bcast) return std::make_unique<Bcast>(seg, a, m, rounds_for(a.count, m));
      return std::make_unique<Reduce>(seg, a, kind == Kind::Allreduce, m, rounds_for(a.count, m));
    }
    case Kind::Barrier: return std::make_unique<Barrier>(seg);
    default: return nullptr;
  }
}

bool shm_single_copy(const shm::Step& st) {
  const auto* r = dynamic_cast<const Rounds*>(&st);
  return r && r->is_single_copy();
}

}  // namespace hier::exec
