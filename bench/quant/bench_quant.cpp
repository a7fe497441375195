// Throughput of the host quantization kernels (src/quant/host.cpp) against memcpy of the same
// bytes, in one run, one process, no MPI:
//   bench_quant [--quick] [--block B] [--sweep] [--f16]
// GB/s are bytes of float32 input per second (for memcpy: the float32 buffer copied). Each
// figure is the median of 9 rounds; within a round every variant runs one batch of >= 20 ms
// (5 ms with --quick), so all variants share the quiet and the busy moments of a shared machine.
// --sweep prints the same for several block sizes (how kDefaultBlock was chosen). --f16: the
// same on 16-bit floats (quant/f16.hpp; MPIX_C_FLOAT16), GB/s of f16 input, the fused column
// being dequantize_sum of one part (summed in float, rounded to f16 once).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.hpp"

namespace {

using Clock = std::chrono::steady_clock;
bool g_quick = false;

std::vector<double> median_times(const std::vector<std::function<void()>>& fns) {
  const double min_batch = g_quick ? 0.005 : 0.02;
  std::vector<int> reps(fns.size(), 1);
  for (size_t k = 0; k < fns.size(); ++k) {
    fns[k]();  // warm up: page faults, caches
    for (;;) {
      auto t0 = Clock::now();
      for (int i = 0; i < reps[k]; ++i) fns[k]();
      if (std::chrono::duration<double>(Clock::now() - t0).count() >= min_batch) break;
      reps[k] *= 2;
    }
  }
  std::vector<std::vector<double>> t(fns.size());
  for (int round = 0; round < 9; ++round)
    for (size_t k = 0; k < fns.size(); ++k) {
      auto t0 = Clock::now();
      for (int i = 0; i < reps[k]; ++i) fns[k]();
      t[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count() / reps[k]);
    }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

// The fused dequantize-reduce of T: add into T for float, the float-accumulated sum for f16.
void deq_reduce(const unsigned char* q, int64_t n, int64_t block, int bits, float* acc) {
  hier::quant::dequantize_add(q, n, block, bits, acc);
}
#if HIER_QUANT_F16
void deq_reduce(const unsigned char* q, int64_t n, int64_t block, int bits, hier::quant::f16* acc) {
  hier::quant::dequantize_sum(q, 0, 1, n, block, bits, acc);
}
#endif

template <class T>
void run(int64_t bytes, int64_t block, bool header) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(T));
  std::vector<T> x(n), acc(n), copy(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0, 1);
  for (auto& v : x) v = static_cast<T>(g(rng));
  std::vector<unsigned char> q8(hier::quant::quantized_bytes(n, block, 8)), q4(hier::quant::quantized_bytes(n, block, 4));
  hier::quant::quantize(x.data(), n, block, 8, q8.data());
  hier::quant::quantize(x.data(), n, block, 4, q4.data());
  const std::vector<const char*> names = {"memcpy", "quantize int8", "quantize int4", "deq+add int8", "deq+add int4"};
  const std::vector<double> t = median_times({
      [&] { std::memcpy(copy.data(), x.data(), n * sizeof(T)); },
      [&] { hier::quant::quantize(x.data(), n, block, 8, q8.data()); },
      [&] { hier::quant::quantize(x.data(), n, block, 4, q4.data()); },
      [&] { deq_reduce(q8.data(), n, block, 8, acc.data()); },
      [&] { deq_reduce(q4.data(), n, block, 4, acc.data()); },
  });
  if (header) {
    std::printf(sizeof(T) == 2 ? "| float16 bytes | block |" : "| float32 bytes | block |");
    for (auto* s : names) std::printf(" %s GB/s |", s);
    std::printf(" worst / memcpy |\n|---:|---:|");
    for (size_t k = 0; k <= names.size(); ++k) std::printf("---:|");
    std::printf("\n");
  }
  std::printf("| %lld | %lld |", static_cast<long long>(bytes), static_cast<long long>(block));
  double worst = 1e30;
  for (double s : t) {
    std::printf(" %.2f |", bytes / s / 1e9);
    worst = std::min(worst, t[0] / s);
  }
  std::printf(" %.2f |\n", worst);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t block = hier::quant::kDefaultBlock;
  bool sweep = false, f16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") g_quick = true;
    else if (a == "--sweep") sweep = true;
    else if (a == "--f16") f16 = true;
    else if (a == "--block" && i + 1 < argc) block = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_quant [--quick] [--block B] [--sweep] [--f16]\n");
      return 2;
    }
  }
#if HIER_QUANT_F16
  auto run_at = f16 ? run<hier::quant::f16> : run<float>;
#else
  if (f16) {
    std::fprintf(stderr, "bench_quant: --f16: this compiler has no 16-bit float (quant/f16.hpp)\n");
    return 2;
  }
  auto run_at = run<float>;
#endif
  if (!hier::quant::valid_block(block)) {
    std::fprintf(stderr, "bench_quant: --block %lld: a multiple of 8 in [8, 65536]\n", static_cast<long long>(block));
    return 2;
  }
  bool header = true;
  if (sweep) {
    for (int64_t b : {64, 128, 256, 512, 1024, 2048, 4096}) {
      run_at(int64_t{16} << 20, b, header);
      header = false;
    }
    return 0;
  }
  for (int64_t bytes : {int64_t{16} << 20, int64_t{1} << 20}) {
    run_at(bytes, block, header);
    header = false;
  }
  return 0;
}
