#include "sched/cache.hpp"

namespace hier::sched {

size_t KeyHash::operator()(const Key& k) const noexcept {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(k.coll);
  mix(static_cast<uint64_t>(k.algo));
  mix(k.in_place | (k.ordered << 1) | (k.shm << 2));
  mix(static_cast<uint64_t>(k.root));
  mix(static_cast<uint64_t>(k.n));
  mix(static_cast<uint64_t>(k.chunks));
  for (int64_t c : k.counts) mix(static_cast<uint64_t>(c));
  mix(static_cast<uint64_t>(k.extent));
  mix(static_cast<uint64_t>(k.true_extent));
  mix(static_cast<uint64_t>(k.true_lb));
  mix(k.quant | (static_cast<uint64_t>(static_cast<uint32_t>(k.quant_block)) << 8));
  return static_cast<size_t>(h);
}

const Cache::Entry* Cache::find(const Key& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second.get();
}

Cache::Entry& Cache::insert(const Key& key) {
  if (map_.size() >= kMaxEntries) map_.clear();  // a program sweeping sizes: start over
  auto& slot = map_[key];
  slot = std::make_unique<Entry>();
  return *slot;
}

}  // namespace hier::sched
