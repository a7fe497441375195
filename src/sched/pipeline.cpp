#include "sched/pipeline.hpp"

#include <algorithm>

#include "sched/build.hpp"

namespace hier::sched {

namespace {
int64_t pieces(int64_t units, int64_t align) { return align <= 1 ? units : (units + align - 1) / align; }
int64_t round_up_64(int64_t b) { return (b + 63) / 64 * 64; }
}  // namespace

int chunk_count(int64_t units, int64_t bytes, int64_t chunk_bytes, int64_t align) {
  const int64_t n = pieces(units, align);
  if (chunk_bytes <= 0 || bytes <= chunk_bytes || n < 2) return 1;
  const int64_t c = (bytes + chunk_bytes - 1) / chunk_bytes;
  return static_cast<int>(std::min<int64_t>({c, kMaxChunks, n}));
}

Split split_aligned(int64_t units, int chunks, int64_t align) {
  if (align <= 1) return split_even(units, chunks);
  Split sp = split_even(pieces(units, align), chunks);
  for (size_t c = 0; c < sp.counts.size(); ++c) {
    sp.displs[c] = std::min(sp.displs[c] * align, units);
    sp.counts[c] = std::min(sp.counts[c] * align, units - sp.displs[c]);
  }
  return sp;
}

Schedule pipeline(int64_t units, int chunks, const std::function<Schedule(int64_t)>& build, int64_t align) {
  if (chunks <= 1 || chunks > pieces(units, align)) return build(units);
  const Split sp = split_aligned(units, chunks, align);
  Schedule out;
  struct Placed {
    int wave, chunk, index;
    Step step;
  };
  std::vector<Placed> all;
  for (int c = 0; c < chunks; ++c) {
    Schedule one = build(sp.counts[c]);
    if (c == 0) {
      // Everything the first chunk's schedule says about the whole call (name, unit, the plan's
      // choices, the quantization, and any field added later), copied whole; then what differs:
      // the regions and steps, summed and interleaved over the chunks below.
      out = one;
      out.steps.clear();
      out.scratch = out.residual = out.records = 0;
    }
    // This chunk's own regions: scratch and residual (units) and records (bytes, 64-aligned).
    const int64_t scratch_base = out.scratch, residual_base = out.residual;
    const int64_t records_base = one.records > 0 ? round_up_64(out.records) : out.records;
    out.scratch += one.scratch;
    out.residual += one.residual;
    if (one.records > 0) out.records = records_base + one.records;
    auto shift = [&](Ref& r) {
      r.off += r.buf == Buf::Scratch ? scratch_base : r.buf == Buf::Records ? records_base : sp.displs[c];
    };
    int last_stage = -1;
    for (size_t i = 0; i < one.steps.size(); ++i) {
      Step st = one.steps[i];
      const int stage = st.stage >= 0 ? st.stage : static_cast<int>(i);
      // Block steps address the user's blocks, which a chunk of the vector cannot cut; two
      // steps of one chunk in one wave would race. Neither comes from the builders that are
      // pipelined (the unit tests check), but if one did, the call runs unchunked.
      if (st.kind == Kind::LoadBlock || st.kind == Kind::StoreBlock || st.wave >= 0 || stage <= last_stage)
        return build(units);
      last_stage = stage;
      shift(st.src);
      shift(st.dst);
      if (st.residual >= 0) st.residual += residual_base;
      st.wave = c + stage;
      all.push_back({st.wave, c, static_cast<int>(i), std::move(st)});
    }
  }
  // Wave by wave; inside a wave, older chunks first: one issue order on every communicator.
  std::stable_sort(all.begin(), all.end(), [](const Placed& a, const Placed& b) {
    return a.wave != b.wave ? a.wave < b.wave : a.chunk < b.chunk;
  });
  for (Placed& p : all) out.steps.push_back(std::move(p.step));
  out.chunks = chunks;
  return out;
}

}  // namespace hier::sched
