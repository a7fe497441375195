#include "base/hooks.hpp"

#include <mutex>
#include <utility>
#include <vector>

namespace hier::base {
namespace {
std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::vector<std::function<void()>>& finalize_hooks() {
  static std::vector<std::function<void()>> v;
  return v;
}
std::vector<std::pair<std::string, std::function<std::string()>>>& sections() {
  static std::vector<std::pair<std::string, std::function<std::string()>>> v;
  return v;
}
struct Notes {
  std::function<void(const char*, const std::string&)> sink;
  std::vector<std::pair<const char*, std::string>> early;  // noted before the sink was set
};
Notes& notes() {
  static Notes n;
  return n;
}
}  // namespace

void note_info(const char* subsys, const std::string& text) {
  std::function<void(const char*, const std::string&)> sink;
  {
    std::lock_guard<std::mutex> lk(mu());
    if (!notes().sink) {
      notes().early.emplace_back(subsys, text);
      return;
    }
    sink = notes().sink;
  }
  sink(subsys, text);  // outside the lock: the logger may take its own
}

void set_info_sink(std::function<void(const char*, const std::string&)> sink) {
  std::vector<std::pair<const char*, std::string>> early;
  {
    std::lock_guard<std::mutex> lk(mu());
    notes().sink = sink;
    early.swap(notes().early);
  }
  if (sink)
    for (auto& [subsys, text] : early) sink(subsys, text);
}

void add_finalize_hook(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu());
  finalize_hooks().push_back(std::move(fn));
}

void add_report_section(std::string key, std::function<std::string()> json_text) {
  std::lock_guard<std::mutex> lk(mu());
  sections().emplace_back(std::move(key), std::move(json_text));
}

void run_finalize_hooks() {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lk(mu());
    hooks.swap(finalize_hooks());
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
}

void for_each_report_section(const std::function<void(const std::string&, const std::string&)>& fn) {
  std::vector<std::pair<std::string, std::function<std::string()>>> copy;
  {
    std::lock_guard<std::mutex> lk(mu());
    copy = sections();
  }
  for (auto& [k, f] : copy) fn(k, f());
}

}  // namespace hier::base
