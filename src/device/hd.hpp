// HIER_HD marks kernel bodies that the host backend runs today and a GPU backend (HIP, CUDA)
// compiles unchanged later: the tests check exactly the logic the device would run.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HIER_HD __host__ __device__
#else
#define HIER_HD
#endif

// Forces a small per-point body (a lambda handed to an odometer) into its loop: without it GCC
// may keep it out of line when the odometer calls it from several places, and every point then
// pays a call and reloads its state through memory.
#if defined(__GNUC__) || defined(__clang__)
#define HIER_FORCE_INLINE __attribute__((always_inline))
#else
#define HIER_FORCE_INLINE
#endif
