// The signatures of the blocking collectives on MPI_COMM_WORLD and their comparison across the
// ranks at finalize (diag/collective_sequence.hpp).
#include "diag/collective_sequence.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>

#include "diag/log.hpp"
#include "diag/ranks_text.hpp"
#include "hier/fn.hpp"

namespace hier::diag {

namespace {

struct WorldSeq {
  std::atomic<uint64_t> n{0}, hash{0};
  std::atomic<uint64_t> ring[kSeqRing] = {};  // signature of collective #k at ring[k % kSeqRing]
};
WorldSeq g_world;

// Collectives whose message size (the report's bytes) is the same on every rank of a correct
// program: it enters their signature (interposer/api.txt's flag agree).
bool bytes_agree(Fn b) { return kFnBytesAgree[static_cast<int>(b)]; }

uint64_t signature(int fn, int root, uint64_t bytes) {
  const Fn b = base_of(static_cast<Fn>(fn));
  const uint64_t by = bytes_agree(b) ? (bytes & 0xffffffffull) : 0;
  return (static_cast<uint64_t>(static_cast<uint16_t>(b)) << 48) ^
         (static_cast<uint64_t>(static_cast<uint16_t>(root + 1)) << 32) ^ by;
}

std::string sig_text(uint64_t sig) {
  const int fn = static_cast<int>(sig >> 48);
  const int root = static_cast<int>((sig >> 32) & 0xffff) - 1;
  std::string s = fn_name(fn);
  std::string args;
  if (bytes_agree(static_cast<Fn>(fn))) args = std::to_string(sig & 0xffffffffull) + " bytes";
  if (root >= 0) args += (args.empty() ? "" : ", ") + std::string("root ") + std::to_string(root);
  return args.empty() ? s : s + "(" + args + ")";
}

}  // namespace

void sequence_record(int fn, int root, uint64_t bytes) noexcept {
  const uint64_t s = signature(fn, root, bytes);
  const uint64_t n = g_world.n.load(std::memory_order_relaxed) + 1;
  g_world.ring[n % kSeqRing].store(s, std::memory_order_relaxed);
  g_world.hash.store(mix64(g_world.hash.load(std::memory_order_relaxed) ^ s), std::memory_order_relaxed);
  g_world.n.store(n, std::memory_order_relaxed);
}

SeqRecord sequence_now() {
  SeqRecord r{};
  r.n = g_world.n.load();
  r.hash = g_world.hash.load();
  for (int i = 0; i < kSeqRing; ++i) r.ring[i] = g_world.ring[i].load();
  return r;
}

// The sequences compared (count and running hash, and the last kSeqRing signatures to say where
// they part).
std::string sequence_check_json(const std::vector<SeqRecord>& ranks) {
  const int size = static_cast<int>(ranks.size());
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int>> groups;
  uint64_t lo_n = UINT64_MAX, hi_n = 0;
  for (int r = 0; r < size; ++r) {
    const SeqRecord& h = ranks[static_cast<size_t>(r)];
    groups[{h.n, h.hash}].push_back(r);
    lo_n = std::min(lo_n, h.n);
    hi_n = std::max(hi_n, h.n);
  }
  nlohmann::json j = {{"communicator", "MPI_COMM_WORLD"}, {"compared", "sequence of (collective, bytes, root) per rank"}};
  if (groups.size() == 1) {
    j["match"] = true;
    j["collectives"] = lo_n;
    return j.dump();
  }
  j["match"] = false;
  nlohmann::json jg = nlohmann::json::array();
  std::string line = "MISMATCH at MPI_Finalize: the blocking collectives on MPI_COMM_WORLD differ between ranks:";
  std::vector<std::pair<std::vector<int>, uint64_t>> by_rank;  // listed from the lowest rank
  for (auto& [k, rs] : groups) by_rank.push_back({rs, k.first});
  std::sort(by_rank.begin(), by_rank.end());
  for (auto& [rs, n] : by_rank) {
    jg.push_back({{"ranks", rs}, {"collectives", n}});
    line += (rs.size() == 1 ? " rank " : " ranks ") + ranks_text(rs) + " made " + std::to_string(n) + ";";
  }
  j["groups"] = jg;
  // The first sequence number, among those every rank still holds in its ring, where they differ.
  const uint64_t from = hi_n >= static_cast<uint64_t>(kSeqRing) ? hi_n - kSeqRing + 1 : 1;
  for (uint64_t p = std::max<uint64_t>(from, 1); p <= lo_n; ++p) {
    std::map<uint64_t, std::vector<int>> at;
    for (int r = 0; r < size; ++r) at[ranks[static_cast<size_t>(r)].ring[p % kSeqRing]].push_back(r);
    if (at.size() < 2) continue;
    nlohmann::json calls = nlohmann::json::array();
    line += " first difference at collective #" + std::to_string(p) + ":";
    for (auto& [sig, rs] : at) {
      calls.push_back({{"call", sig_text(sig)}, {"ranks", rs}});
      line += (rs.size() == 1 ? " rank " : " ranks ") + ranks_text(rs) + " called " + sig_text(sig) + ";";
    }
    j["first_difference"] = {{"sequence", p}, {"calls", calls}};
    break;
  }
  if (!j.contains("first_difference")) {
    if (lo_n == hi_n) line += " the difference lies before the last " + std::to_string(kSeqRing) + " collectives";
    else line += " the ranks that made more went on after #" + std::to_string(lo_n);
  }
  if (line.back() == ';') line.pop_back();
  log::write(config::LogLevel::Warn, "report", __FILE__, __LINE__, "%s", line.c_str());
  j["message"] = line;
  return j.dump();
}

}  // namespace hier::diag
