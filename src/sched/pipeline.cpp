#include "sched/pipeline.hpp"

#include <algorithm>

#include "sched/build.hpp"

namespace hier::sched {

int chunk_count(int64_t units, int64_t bytes, int64_t chunk_bytes) {
  if (chunk_bytes <= 0 || bytes <= chunk_bytes || units < 2) return 1;
  const int64_t c = (bytes + chunk_bytes - 1) / chunk_bytes;
  return static_cast<int>(std::min<int64_t>({c, kMaxChunks, units}));
}

Schedule pipeline(int64_t units, int chunks, const std::function<Schedule(int64_t)>& build) {
  if (chunks <= 1) return build(units);
  const Split sp = split_even(units, chunks);
  Schedule out;
  struct Placed {
    int wave, chunk, index;
    Step step;
  };
  std::vector<Placed> all;
  for (int c = 0; c < chunks; ++c) {
    Schedule one = build(sp.counts[c]);
    if (c == 0) {
      out.name = one.name;
      out.unit = one.unit;
      out.reads_recv = one.reads_recv;
      out.writes_recv = one.writes_recv;
    }
    const int64_t scratch_base = out.scratch;
    out.scratch += one.scratch;
    auto shift = [&](Ref& r) { r.off += r.buf == Buf::Scratch ? scratch_base : sp.displs[c]; };
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
