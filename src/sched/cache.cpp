#include "sched/cache.hpp"

namespace hier::sched {

size_t KeyHash::operator()(const Key& k) const noexcept {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(k.coll);
  mix(static_cast<uint64_t>(k.algo));
  mix(k.in_place | (k.ordered << 1));
  mix(static_cast<uint64_t>(k.root));
  mix(static_cast<uint64_t>(k.n));
  mix(static_cast<uint64_t>(k.chunks));
  for (int64_t c : k.counts) mix(static_cast<uint64_t>(c));
  return static_cast<size_t>(h);
}

const Schedule& Cache::get(const Key& key, const std::function<Schedule()>& build, bool* built) {
  if (auto it = map_.find(key); it != map_.end()) {
    if (built) *built = false;
    return *it->second;
  }
  if (map_.size() >= kMaxEntries) map_.clear();  // a program sweeping sizes: start over
  if (built) *built = true;
  return *map_.emplace(key, std::make_unique<Schedule>(build())).first->second;
}

}  // namespace hier::sched
