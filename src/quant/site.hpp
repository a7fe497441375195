// A quantized call site: the communicator's context (exec::Context, opaque here), the
// collective, the input buffer's address and its count. Error feedback keeps one residual per
// site (quant/feedback.hpp) and the check reports its errors per site (quant/stats.hpp).
#pragma once

#include <cstdint>
#include <tuple>

#include "config/config.hpp"

namespace hier::quant {

using Site = std::tuple<const void*, config::Coll, const void*, int64_t>;

}  // namespace hier::quant
