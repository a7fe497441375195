// Calls that were to run hierarchically but went to the MPI unchanged on every rank because some
// rank could not acquire what the schedule needs (see exec/prepare.hpp). Counted per
// acquisition point for the report's "fallbacks" section; the first of each kind is logged.
#pragma once

#include <cstdint>

namespace hier::exec {

enum class Acquire : uint8_t { Levels, Plan, Scratch, Count };

// `local`: this rank is the one that failed (it logs why); otherwise a peer did.
void note_fallback(Acquire point, bool local);

// Total fallbacks at `point` so far in this process (tests).
uint64_t fallbacks(Acquire point);

}  // namespace hier::exec
