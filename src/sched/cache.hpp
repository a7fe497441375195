// Schedules cached per communicator (the cache lives in the communicator's context) and keyed by
// what shapes a schedule: collective, algorithm, size in units, root, in-place, per-rank counts.
// The datatype handle is deliberately not part of the key: element schedules are in units of the
// datatype, so the same schedule serves any type (and a freed, reused type handle cannot hit a
// stale entry).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sched/build.hpp"
#include "sched/ir.hpp"

namespace hier::sched {

struct Key {
  uint8_t coll = 0;
  Algorithm algo = Algorithm::Flat;
  bool in_place = false;
  bool ordered = false;
  int root = -1;
  int64_t n = 0;
  std::vector<int64_t> counts;  // per-rank counts (reduce_scatter, allgatherv); empty otherwise
  int chunks = 1;               // pipelined in this many chunks (sched/pipeline.hpp)
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const noexcept;
};

class Cache {
 public:
  // The cached schedule for `key`, built by `build` on a miss. The reference stays valid until
  // the next call (the cache is bounded and may be cleared when full).
  const Schedule& get(const Key& key, const std::function<Schedule()>& build, bool* built = nullptr);
  size_t size() const { return map_.size(); }

 private:
  static constexpr size_t kMaxEntries = 256;
  std::unordered_map<Key, std::unique_ptr<Schedule>, KeyHash> map_;
};

}  // namespace hier::sched
