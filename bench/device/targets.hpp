// The GPU check's rate targets (issue 36), one table: bench_device marks its rows by them and
// gpu_verdict judges a bench_device JSON by them (tools/gpu-check.sh verdict FILE). Each is a
// fraction of a device-to-device copy of the same bytes, at each of the judged sizes.
#pragma once

#include <cstdint>

namespace hier::bench {

inline constexpr double kPackTarget = 0.7;   // pack and unpack (bench_device's "pack_sizes" rows)
inline constexpr double kQuantTarget = 0.5;  // quantize and dequantize + add, every format measured
inline constexpr int64_t kJudgedSizes[] = {int64_t{16} << 20, int64_t{256} << 20};
// The layout of the sized pack rows: float blocks of kPackBlockBytes every 2 * kPackBlockBytes.
inline constexpr int64_t kPackBlockBytes = 64;

}  // namespace hier::bench
