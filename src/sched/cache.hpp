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
  // Element schedules: the datatype's layout (extent, true extent, true lower bound), which sizes
  // the scratch reserved with the schedule. Reductions take the same datatype on every rank (MPI
  // requires it), so the key, and with it every cache miss, is the same on every rank.
  int64_t extent = 0, true_extent = 0, true_lb = 0;
  // Quantized schedules (exec/coll_quant.cpp): bits per value (8, 4; 0 = exact) and block size,
  // which size the records reserved with the schedule.
  uint8_t quant = 0;
  int32_t quant_block = 0;
  // HIER_SHM: the plan's transport for the level steps inside a node (exec/prepare.cpp sets it):
  // one call planned with and one without the segment are two schedules.
  bool shm = false;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const noexcept;
};

// Every rank of a communicator sees the same sequence of keys, so every rank misses (and clears
// the cache when full) on the same calls: the executor agrees on what a miss acquires there
// (exec/prepare.cpp), never on a hit. A key therefore holds only what is the same on every rank;
// where one rank's schedule has two forms (the root of a reduce, in place or not), both are
// variants of one entry.
class Cache {
 public:
  static constexpr int kVariants = 2;
  struct Entry {
    // Shared: a nonblocking request (exec/request.hpp) keeps its schedule past an eviction.
    std::shared_ptr<const Schedule> variant[kVariants];
  };
  // The cached entry for `key`, or null. The pointer stays valid until the next insert.
  const Entry* find(const Key& key) const;
  // A new, empty entry for `key` (clearing the cache first when it is full).
  Entry& insert(const Key& key);
  void erase(const Key& key) { map_.erase(key); }
  size_t size() const { return map_.size(); }
  // Every entry, in no particular order (tests: the schedules the executor ran).
  template <class F>
  void each(F f) const {
    for (const auto& [k, e] : map_) f(k, *e);
  }

 private:
  static constexpr size_t kMaxEntries = 256;
  std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash> map_;
};

}  // namespace hier::sched
