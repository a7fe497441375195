// The report's "quantization" section (docs/quantization.md): per collective, the quantized
// calls, the bytes they sent across nodes against the exact equivalent and the planner's
// predictions; the check's errors (HIER_QUANT_CHECK), per collective and per call site; error
// feedback's totals (quant/feedback.hpp). Also the check's sampling. exec/coll_quant.cpp makes
// the calls and notes them here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config/config.hpp"
#include "quant/site.hpp"

namespace hier::quant {

// One quantized call (one start of a persistent request) of `c` with `bits`: the bytes this rank
// sends across nodes, exactly (`exact_bytes`) and quantized (`sent_bytes`); the planner's
// predictions, quantized and of its best exact plan; `request`: nonblocking or persistent.
void note_call(config::Coll c, int bits, int64_t exact_bytes, int64_t sent_bytes, double quant_ns, double exact_ns,
               bool request);

// Whether this call is one that HIER_QUANT_CHECK samples: every Nth quantized call per
// communicator (`ctx`, its context) and collective. The same on every rank (every rank makes the
// same sequence of collective calls on a communicator, and eligibility is decided from what they
// share).
bool check_this_call(const void* ctx, config::Coll c);

// Records one check of `site`: the largest absolute error and that relative to the largest |exact|.
void note_check_error(const Site& site, double max_abs, double max_rel);

// Records the error of `got` against `exact` (n values): the largest absolute difference, and
// that divided by the largest |exact| (a norm-relative error; per-element relative errors are
// meaningless next to zero). Non-finite exact values are left out.
template <class T>
void note_check(const Site& site, const T* got, const T* exact, int64_t n) {
  double mabs = 0, mref = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(exact[i]);
    if (!std::isfinite(e)) continue;
    const double d = std::fabs(static_cast<double>(got[i]) - e);
    mabs = std::isnan(d) ? INFINITY : std::max(mabs, d);
    mref = std::max(mref, std::fabs(e));
  }
  const double rel = mabs == 0 ? 0.0 : (mref > 0 ? mabs / mref : INFINITY);
  note_check_error(site, mabs, rel);
}

}  // namespace hier::quant
