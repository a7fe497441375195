#include "core/staged_persistent.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/hooks.hpp"
#include "diag/log.hpp"

namespace hier::core::staged_persistent {

std::atomic<int> g_kept{0};

namespace {

struct Entry {
  std::function<int()> before, after;
  bool started = false;
};
std::mutex g_mu;
std::unordered_map<MPI_Request, std::shared_ptr<Entry>> g_entries;  // under g_mu
// Freed while started: the MPI's request, kept until its start completed (under g_mu).
std::vector<std::pair<MPI_Request, std::shared_ptr<Entry>>> g_freed;

std::shared_ptr<Entry> find(MPI_Request h) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_entries.find(h);
  return it == g_entries.end() ? nullptr : it->second;
}

void copy_back(Entry& e) {
  if (const int rc = e.after(); rc != MPI_SUCCESS)
    HIER_WARN("core", "a persistent collective's results could not be copied back to device memory (MPI code %d)", rc);
}

// At MPI_Finalize every communication is complete: the freed requests' copies go back.
void finish_freed() {
  std::vector<std::pair<MPI_Request, std::shared_ptr<Entry>>> freed;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    freed.swap(g_freed);
  }
  for (auto& [h, e] : freed) {
    if (PMPI_Wait(&h, MPI_STATUS_IGNORE) == MPI_SUCCESS) copy_back(*e);
    PMPI_Request_free(&h);
    g_kept.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace

void keep(MPI_Request h, std::function<int()> before, std::function<int()> after) {
  static std::once_flag once;
  std::call_once(once, [] { base::add_finalize_hook(finish_freed); });
  auto e = std::make_shared<Entry>();
  e->before = std::move(before);
  e->after = std::move(after);
  std::lock_guard<std::mutex> lk(g_mu);
  g_entries[h] = std::move(e);
  g_kept.fetch_add(1, std::memory_order_relaxed);
}

bool kept(MPI_Request h) { return h != MPI_REQUEST_NULL && any() && find(h) != nullptr; }

int start(MPI_Request* h) {
  const std::shared_ptr<Entry> e = find(*h);
  if (!e) return PMPI_Start(h);
  if (const int rc = e->before(); rc != MPI_SUCCESS) return rc;
  const int rc = PMPI_Start(h);
  if (rc == MPI_SUCCESS) {
    std::lock_guard<std::mutex> lk(g_mu);
    e->started = true;
  }
  return rc;
}

void completed(MPI_Request h, bool ok) {
  const std::shared_ptr<Entry> e = find(h);
  if (!e) return;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!e->started) return;
    e->started = false;
  }
  if (ok) copy_back(*e);
}

int free(MPI_Request* h) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_entries.find(*h);
    if (it == g_entries.end()) return PMPI_Request_free(h);
    e = std::move(it->second);
    g_entries.erase(it);
    if (e->started) {  // the MPI's request stays until its start completed
      g_freed.emplace_back(*h, std::move(e));
      *h = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    }
  }
  g_kept.fetch_sub(1, std::memory_order_relaxed);
  return PMPI_Request_free(h);
}

void progress_freed() {
  std::vector<std::pair<MPI_Request, std::shared_ptr<Entry>>> done;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (size_t i = 0; i < g_freed.size(); ++i) {
      int flag = 0;
      const int rc = PMPI_Test(&g_freed[i].first, &flag, MPI_STATUS_IGNORE);
      if (!flag && rc == MPI_SUCCESS) continue;
      done.push_back(std::move(g_freed[i]));
      if (rc != MPI_SUCCESS) done.back().second->started = false;  // failed: nothing to copy back
      g_freed.erase(g_freed.begin() + static_cast<std::ptrdiff_t>(i--));
    }
  }
  for (auto& [h, e] : done) {
    if (e->started) copy_back(*e);
    PMPI_Request_free(&h);
    g_kept.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace hier::core::staged_persistent
