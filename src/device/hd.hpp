// HIER_HD marks kernel bodies that the host backend runs today and a GPU backend (HIP, CUDA)
// compiles unchanged later: the tests check exactly the logic the device would run.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HIER_HD __host__ __device__
#else
#define HIER_HD
#endif
