#include "shm/step.hpp"

#include <algorithm>

#include "shm/wait.hpp"

namespace hier::shm {

Step::Step(Segment& seg) : seg_(seg) { seg_.queue().push_back(this); }

Step::~Step() {
  // Normally complete (and dequeued) by now: Pending::complete finishes every step started.
  auto& q = seg_.queue();
  q.erase(std::remove(q.begin(), q.end(), this), q.end());
}

bool advance(Step& s) {
  auto& q = s.seg_.queue();
  while (!s.complete_ && !q.empty()) {
    Step* f = q.front();
    if (!f->poll()) return false;
    f->complete_ = true;
    q.pop_front();
  }
  return s.complete_;
}

namespace {
uint64_t g_yields_before_sleep = 64;
}

void set_yields_before_sleep(uint64_t n) { g_yields_before_sleep = n; }

int finish(Step& s) {
  Bell bell{&s.seg_.bell(), &s.seg_.sleepers(), g_yields_before_sleep};
  wait_until([&] { return advance(s); }, bell);
  return s.rc();
}

}  // namespace hier::shm
