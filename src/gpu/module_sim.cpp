// The simulated device's module (libhier-sim.so): gpu/module.cu, the kernel source of the CUDA
// and HIP modules, compiled by the host compiler over gpu/sim_runtime.hpp. Included rather than
// listed as a source, because CMake compiles a .cu file as CUDA wherever CUDA is enabled.
#include "gpu/module.cu"
