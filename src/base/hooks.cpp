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
}  // namespace

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
