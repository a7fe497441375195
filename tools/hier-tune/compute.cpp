// hier-tune's compute figures: MPI_Reduce_local, memcpy and the quantization kernels, per byte.
#include <cmath>
#include <cstring>

#include "measure.hpp"
#include "quant/quant.hpp"

namespace hier::tune {

namespace {

// The host quantization kernels (src/quant, what the quantized collectives run) on `bytes` of
// float32 in blocks of `block` values, for int8 and int4: quantize, dequantize and the fused
// dequantize + add, each per byte of float data (model::QuantRates). Float32 only: the model
// counts a float64 value as its 8 bytes at the same rates.
void measure_quant(int64_t bytes, int64_t block, model::Model& m) {
  const int64_t n = bytes / 4;
  // Gradient-like data: signs and magnitudes vary inside a block and from block to block (the
  // kernels are branch-free, but a constant block would hide nothing either way).
  std::vector<float> x(static_cast<size_t>(n)), out(static_cast<size_t>(n)), acc(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * (1 + (i / block) % 13));
  std::vector<unsigned char> rec(static_cast<size_t>(hier::quant::quantized_bytes(n, block, 8)));
  for (int bits : {8, 4}) {
    const double q = seconds([&] {
      hier::quant::quantize(x.data(), n, block, bits, rec.data());
      asm volatile("" ::"r"(rec.data()) : "memory");
    });
    const double dq = seconds([&] {
      hier::quant::dequantize(rec.data(), n, block, bits, out.data());
      asm volatile("" ::"r"(out.data()) : "memory");
    });
    // (the accumulator grows by one value per call: finite for any number of repetitions)
    const double dqa = seconds([&] {
      hier::quant::dequantize_add(rec.data(), n, block, bits, acc.data());
      asm volatile("" ::"r"(acc.data()) : "memory");
    });
    const double b = static_cast<double>(bytes);
    m.quant(bits) = {1e9 * q / b, 1e9 * dq / b, 1e9 * dqa / b};
  }
}

}  // namespace

void measure_compute(bool quick, int64_t quant_block, model::TuneDoc& doc) {
  const int64_t n = quick ? (1 << 20) : (4 << 20);
  std::vector<float> x(n / 4, 1.0f), y(n / 4, 2.0f);
  std::vector<char> c(n, 1), d(n);
  const double red = seconds([&] { PMPI_Reduce_local(x.data(), y.data(), static_cast<int>(n / 4), MPI_FLOAT, MPI_SUM); });
  const double cp = seconds([&] {
    std::memcpy(d.data(), c.data(), static_cast<size_t>(n));
    asm volatile("" ::"r"(d.data()) : "memory");
  });
  doc.model.reduce_ns_per_byte = 1e9 * red / static_cast<double>(n);
  doc.model.copy_ns_per_byte = 1e9 * cp / static_cast<double>(n);
  measure_quant(n, quant_block, doc.model);
  doc.quant_block = quant_block;
  doc.quant_bytes = n;
}

}  // namespace hier::tune
