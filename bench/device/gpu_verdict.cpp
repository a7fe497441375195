// The GPU check's verdict (tools/gpu-check.sh verdict FILE): a function of bench_device's JSON
// alone. One line per target of targets.hpp (pack and unpack >= 0.7x of a device-to-device copy,
// quantize and dequantize + add >= 0.5x for every format measured, each at 16 MiB and 256 MiB),
// "PASS" or "FAIL" with the measured ratio; a target without its row in the file fails, and so
// does a file whose kernels disagreed with the host bodies (its "failures").
//   gpu_verdict FILE          exit 0: every target met; 1: one or more not; 2: the file is unreadable
//   gpu_verdict --rates FILE  the same ratios for every size in the file, judged by nothing (the
//                             simulated device's rates mean nothing), exit 0 unless unreadable
// No MPI and no GPU: it runs wherever the bench's JSON is (only the C++ runtime).
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "targets.hpp"

namespace {

using json = nlohmann::json;

std::string size_text(int64_t b) {
  char s[32];
  if (b >= (int64_t{1} << 20)) std::snprintf(s, sizeof s, "%g MiB", double(b) / (1 << 20));
  else std::snprintf(s, sizeof s, "%g KiB", double(b) / 1024);
  return s;
}

struct Judge {
  bool judge;
  int failed = 0;
  // One target: the ratio d2d / t (t <= 0 or absent: not measured).
  void line(const std::string& what, int64_t bytes, const json* row, const char* key, double target) {
    const std::string at = what + ", " + size_text(bytes);
    double ratio = -1;
    if (row && row->contains(key) && row->contains("d2d_s")) {
      const double t = (*row)[key].get<double>(), d2d = (*row)["d2d_s"].get<double>();
      if (t > 0 && d2d > 0) ratio = d2d / t;
    }
    if (!judge) {
      if (ratio < 0) std::printf("rate %s: not measured\n", at.c_str());
      else std::printf("rate %s: %.2fx of the d2d copy (target %.1fx; not judged)\n", at.c_str(), ratio, target);
      return;
    }
    if (ratio < 0) {
      std::printf("FAIL %s: not measured (no row in the file)\n", at.c_str());
      ++failed;
    } else if (ratio < target) {
      std::printf("FAIL %s: %.2fx of the d2d copy, below the target %.1fx\n", at.c_str(), ratio, target);
      ++failed;
    } else {
      std::printf("PASS %s: %.2fx of the d2d copy (target %.1fx)\n", at.c_str(), ratio, target);
    }
  }
};

const json* find(const json& rows, const std::function<bool(const json&)>& match) {
  if (!rows.is_array()) return nullptr;
  for (const json& r : rows)
    if (match(r)) return &r;
  return nullptr;
}

int run(const char* path, bool judge) {
  std::ifstream f(path);
  json doc = json::parse(f, nullptr, false);
  if (!f || doc.is_discarded() || !doc.is_object()) {
    std::fprintf(stderr, "gpu_verdict: %s is not a bench_device JSON file\n", path);
    return 2;
  }
  const json empty = json::array();
  const json& packs = doc.contains("pack_sizes") ? doc["pack_sizes"] : empty;
  const json& quant = doc.contains("quant") ? doc["quant"] : empty;
  std::set<int64_t> sizes;
  if (judge) {
    for (int64_t b : hier::bench::kJudgedSizes) sizes.insert(b);
  } else {
    for (const json* rows : {&packs, &quant})
      for (const json& r : *rows)
        if (r.contains("bytes")) sizes.insert(r["bytes"].get<int64_t>());
  }
  // The formats measured (bits, block), in the file's order.
  std::set<std::pair<int, int64_t>> formats;
  for (const json& r : quant)
    if (r.contains("bits") && r.contains("block")) formats.insert({r["bits"].get<int>(), r["block"].get<int64_t>()});
  Judge j{judge};
  if (judge && formats.empty()) {
    std::printf("FAIL quantize and dequantize + add: no quantization rows in the file\n");
    ++j.failed;
  }
  for (int64_t bytes : sizes) {
    const json* p = find(packs, [&](const json& r) { return r.value("bytes", int64_t{0}) == bytes; });
    j.line("pack", bytes, p, "pack_s", hier::bench::kPackTarget);
    j.line("unpack", bytes, p, "unpack_s", hier::bench::kPackTarget);
    for (auto [bits, block] : formats) {
      const json* q = find(quant, [&](const json& r) {
        return r.value("bytes", int64_t{0}) == bytes && r.value("bits", 0) == bits && r.value("block", int64_t{0}) == block;
      });
      const std::string fmt = "int" + std::to_string(bits) + " block " + std::to_string(block);
      j.line("quantize " + fmt, bytes, q, "quantize_s", hier::bench::kQuantTarget);
      j.line("dequantize + add " + fmt, bytes, q, "dequantize_add_s", hier::bench::kQuantTarget);
    }
  }
  const int mismatches = doc.value("failures", 0);
  if (mismatches) {
    std::printf("%s kernel results: %d mismatches against the host bodies\n", judge ? "FAIL" : "rate", mismatches);
    if (judge) ++j.failed;
  }
  if (judge) std::printf("verdict: %s (%d targets not met)\n", j.failed ? "FAILED" : "PASSED", j.failed);
  return judge && j.failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string a = argc > 1 ? argv[1] : "";
  if (argc == 2 && a != "--rates" && a != "--help") return run(argv[1], true);
  if (argc == 3 && a == "--rates") return run(argv[2], false);
  std::fprintf(a == "--help" ? stdout : stderr, "usage: gpu_verdict FILE | gpu_verdict --rates FILE\n");
  return a == "--help" ? 0 : 2;
}
