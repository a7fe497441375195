// Error feedback of the quantized collectives (HIER_QUANT_FEEDBACK, docs/quantization.md): one
// residual per call site, kept across calls, within HIER_QUANT_FEEDBACK's cap in bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "quant/site.hpp"

namespace hier::quant {

// The residual of a call site (`bytes` long, zero at first), or null: feedback off, or the cap
// reached. Purely local: whether a rank has one changes only the values it quantizes, never
// what any rank sends or receives, so ranks need not agree on it. Requests outstanding together
// on one site (the same send buffer and count: legal for nonblocking calls) share it: their
// quantize steps run one at a time (exec/request.cpp's lock; a blocking call on the
// communicator first completes its requests), each adding what the previous one left, so the
// errors still telescope over the calls, in the order their quantize steps ran.
//
// `where`: memory of an allocator's instead of the host's (the device's, for a call bound to
// device buffers: exec/quant_call.cpp), zeroed by it. A site's residual lives in one kind of
// memory: asked for in the other (a host address reused for device memory), it starts anew.
struct ResidualMemory {
  void* (*alloc)(size_t bytes);
  void (*release)(void* p);
  bool (*zero)(void* p, size_t bytes);
};
std::shared_ptr<char[]> residual(const Site& site, int64_t bytes, const ResidualMemory* where = nullptr);

// For the report: the residuals' bytes, their sites, the calls that had one and the sites refused.
struct FeedbackTotals {
  int64_t bytes = 0;
  uint64_t sites = 0, calls = 0, refused = 0;
};
FeedbackTotals feedback_totals();

}  // namespace hier::quant
