#include "dtype/requests.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/hooks.hpp"
#include "device/runtime_copy.hpp"
#include "diag/log.hpp"
#include "dtype/engine.hpp"

namespace hier::dtype {

std::atomic<int> g_owned{0};

MPI_Count landed_bytes(const MPI_Status& st, int err) {
  int cancelled = 0;
  PMPI_Test_cancelled(&st, &cancelled);
  int eclass = MPI_SUCCESS;
  if (err != MPI_SUCCESS) PMPI_Error_class(err, &eclass);
  // A truncated receive still delivers the part that fits, where the MPI does.
  if (cancelled || !(eclass == MPI_SUCCESS || (eclass == MPI_ERR_TRUNCATE && truncated_data_lands()))) return 0;
  MPI_Count bytes = 0;
  PMPI_Get_elements_x(&st, MPI_BYTE, &bytes);
  return bytes == MPI_UNDEFINED ? 0 : bytes;
}

namespace {

struct Owned {
  Staging stage;
  CanonRef canon;  // receives only
  void* buf = nullptr;
  int64_t count = 0;
  bool recv = false;
  size_t device_span = 0;  // > 0: a receive staged for a device buffer at buf (own_device_recv)
  DeviceMessage device;    // set: a packed receive unpacked on the device (own_device_message)
};

std::mutex g_requests_mu;
// A multimap: a send that completes at once may get a shared, pre-completed handle (MPICH's
// lightweight requests, Open MPI's ompi_request_empty for inline sends), so several owned
// sends can have one handle value. Any of them may be finished by any completion of that
// value: they are all complete. (With a map, all but one were dropped: their staging buffers
// leaked, 25 of 26 sends of a halo exchange.)
std::unordered_multimap<MPI_Request, Owned> g_table;
std::vector<std::pair<MPI_Request, Owned>> g_detached;
std::atomic<int> g_ndetached{0};
std::once_flag g_hook_once;

void finish(Owned& o, const MPI_Status& st, int err);

// At MPI_Finalize every communication must be complete: wait for the detached requests so
// their data lands and their buffers are freed.
void finish_detached() {
  std::vector<std::pair<MPI_Request, Owned>> d;
  {
    std::lock_guard<std::mutex> lk(g_requests_mu);
    d.swap(g_detached);
  }
  for (auto& [r, o] : d) {
    MPI_Status st;
    const int rc = PMPI_Wait(&r, &st);
    finish(o, st, rc);
    g_ndetached.fetch_sub(1, std::memory_order_relaxed);
    g_owned.fetch_sub(1, std::memory_order_relaxed);
  }
}

void insert(MPI_Request r, Owned o) {
  std::call_once(g_hook_once, [] { base::add_finalize_hook([] { finish_detached(); stage_trim(); }); });
  std::lock_guard<std::mutex> lk(g_requests_mu);
  g_table.emplace(r, std::move(o));
  g_owned.fetch_add(1, std::memory_order_relaxed);
}

bool take(MPI_Request r, Owned& o) {
  if (r == MPI_REQUEST_NULL) return false;
  std::lock_guard<std::mutex> lk(g_requests_mu);
  auto it = g_table.find(r);
  if (it == g_table.end()) return false;
  o = std::move(it->second);
  g_table.erase(it);
  g_owned.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// Completed: unpack what arrived (a receive that was not cancelled), release the buffer.
// `err` is the request's own error code (from the return value or status.MPI_ERROR).
void finish(Owned& o, const MPI_Status& st, int err) {
  if (o.device) {
    device_land(o.device, o.count, o.buf, st, err);  // releases its own staging buffer
    return;
  }
  if (o.device_span > 0) {
    // The whole span goes back: bytes that did not arrive are the ones copied in at the start.
    if (!device::runtime_copy(o.buf, o.stage.p, o.device_span))
      HIER_WARN("dtype", "the GPU runtime refused to copy a received message into device memory");
  } else if (o.recv) {
    if (const MPI_Count bytes = landed_bytes(st, err); bytes > 0) unpack_prefix(*o.canon, o.stage.p, bytes, o.count, o.buf);
  }
  stage_release(o.stage);
  o.stage = {};
  o.canon = {};
}

void put_back(MPI_Request r, Owned o) {
  std::lock_guard<std::mutex> lk(g_requests_mu);
  g_table.emplace(r, std::move(o));
  g_owned.fetch_add(1, std::memory_order_relaxed);
}

// Owned requests of an array, taken out of the table before the MPI call.
struct Taken {
  std::vector<std::pair<int, Owned>> items;
  std::vector<MPI_Request> handles;  // the handles before the call
};

// One lock for the whole array (a halo exchange completes 52 requests in one Waitall).
bool take_all(int n, MPI_Request* r, Taken& t) {
  std::lock_guard<std::mutex> lk(g_requests_mu);
  for (int i = 0; i < n; ++i) {
    if (r[i] == MPI_REQUEST_NULL) continue;
    auto it = g_table.find(r[i]);
    if (it == g_table.end()) continue;
    if (t.items.empty()) {
      const size_t left = std::min(g_table.size(), static_cast<size_t>(n - i));
      t.items.reserve(left);
      t.handles.reserve(left);
    }
    t.items.emplace_back(i, std::move(it->second));
    t.handles.push_back(r[i]);
    g_table.erase(it);
    g_owned.fetch_sub(1, std::memory_order_relaxed);
  }
  return !t.items.empty();
}

// After a multi-completion call: an owned request whose slot became MPI_REQUEST_NULL
// completed (libhier's requests are never persistent); the others go back to the table.
// status_of(i) gives the status of slot i (nullptr if not reported), err_of(i) its error.
template <class StatusOf, class ErrOf>
void settle(Taken& t, MPI_Request* r, StatusOf status_of, ErrOf err_of) {
  for (size_t k = 0; k < t.items.size(); ++k) {
    auto& [i, o] = t.items[k];
    if (r[i] != MPI_REQUEST_NULL) {
      put_back(t.handles[k], std::move(o));
      continue;
    }
    const MPI_Status* st = status_of(i);
    if (st) finish(o, *st, err_of(i));
    else {  // completed without a status we can read: release without data (not expected)
      HIER_WARN("dtype", "owned request completed without a status; its data is not unpacked");
      stage_release(o.stage);
      device_release(o.device);
    }
  }
}

}  // namespace

void own_send(MPI_Request r, Staging s) { insert(r, Owned{s, {}, nullptr, 0, false, 0, {}}); }

void own_device_recv(MPI_Request r, Staging s, void* device, size_t span) {
  insert(r, Owned{s, {}, device, 0, true, span, {}});
}

void own_device_message(MPI_Request r, DeviceMessage msg, void* buf, int64_t count) {
  Owned o{{}, {}, buf, count, true, 0, {}};
  o.device = std::move(msg);
  insert(r, std::move(o));
}

void own_recv(MPI_Request r, Staging s, CanonRef c, void* buf, int64_t count) {
  insert(r, Owned{s, std::move(c), buf, count, true, 0, {}});
}

std::optional<int> wait(MPI_Request* r, MPI_Status* st) {
  Owned o;
  if (!take(*r, o)) return std::nullopt;
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = PMPI_Wait(r, s);
  finish(o, *s, rc);
  return rc;
}

std::optional<int> test(MPI_Request* r, int* flag, MPI_Status* st) {
  Owned o;
  const MPI_Request h = *r;
  if (!take(h, o)) return std::nullopt;
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = PMPI_Test(r, flag, s);
  if (*flag) finish(o, *s, rc);
  else put_back(h, std::move(o));
  return rc;
}

// Waitall / Testall: `complete(st)` runs the PMPI call on a status array (ours when the user
// ignores statuses, since finishing a packed receive needs its status); then every taken
// request is settled with its own status and error.
template <class Complete>
std::optional<int> complete_all(int n, MPI_Request* r, MPI_Status* st, Complete complete) {
  Taken t;
  if (!take_all(n, r, t)) return std::nullopt;
  std::vector<MPI_Status> local;
  if (st == MPI_STATUSES_IGNORE) {
    local.resize(static_cast<size_t>(n));
    st = local.data();
  }
  const int rc = complete(st);
  settle(t, r, [&](int i) { return &st[i]; },
         [&](int i) { return rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : rc; });
  return rc;
}

std::optional<int> waitall(int n, MPI_Request* r, MPI_Status* st) {
  return complete_all(n, r, st, [&](MPI_Status* s) { return PMPI_Waitall(n, r, s); });
}

std::optional<int> testall(int n, MPI_Request* r, int* flag, MPI_Status* st) {
  return complete_all(n, r, st, [&](MPI_Status* s) { return PMPI_Testall(n, r, flag, s); });
}

std::optional<int> waitany(int n, MPI_Request* r, int* index, MPI_Status* st) {
  Taken t;
  if (!take_all(n, r, t)) return std::nullopt;
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = PMPI_Waitany(n, r, index, s);
  settle(t, r, [&](int i) { return i == *index ? s : nullptr; }, [&](int) { return rc; });
  return rc;
}

std::optional<int> testany(int n, MPI_Request* r, int* index, int* flag, MPI_Status* st) {
  Taken t;
  if (!take_all(n, r, t)) return std::nullopt;
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = PMPI_Testany(n, r, index, flag, s);
  settle(t, r, [&](int i) { return *flag && i == *index ? s : nullptr; }, [&](int) { return rc; });
  return rc;
}

namespace {
std::optional<int> some(bool wait_mode, int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st) {
  Taken t;
  if (!take_all(n, r, t)) return std::nullopt;
  std::vector<MPI_Status> local;
  if (st == MPI_STATUSES_IGNORE) {
    local.resize(static_cast<size_t>(n));
    st = local.data();
  }
  const int rc = wait_mode ? PMPI_Waitsome(n, r, outcount, indices, st) : PMPI_Testsome(n, r, outcount, indices, st);
  auto pos = [&](int i) -> int {
    if (*outcount == MPI_UNDEFINED) return -1;
    for (int k = 0; k < *outcount; ++k)
      if (indices[k] == i) return k;
    return -1;
  };
  settle(t, r, [&](int i) -> const MPI_Status* { const int k = pos(i); return k < 0 ? nullptr : &st[k]; },
         [&](int i) { const int k = pos(i); return rc == MPI_ERR_IN_STATUS && k >= 0 ? st[k].MPI_ERROR : rc; });
  return rc;
}
}  // namespace

std::optional<int> waitsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st) {
  return some(true, n, r, outcount, indices, st);
}

std::optional<int> testsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st) {
  return some(false, n, r, outcount, indices, st);
}

std::optional<int> request_free(MPI_Request* r) {
  Owned o;
  MPI_Request h = *r;
  if (!take(h, o)) return std::nullopt;
  // Already complete (the usual case when a program frees a request it knows is done): finish
  // it now, so a freed receive's data is in place when MPI_Request_free returns.
  MPI_Status st;
  int flag = 0;
  const int rc = PMPI_Test(&h, &flag, &st);
  if (flag) {
    finish(o, st, rc);
    *r = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
  }
  {
    std::lock_guard<std::mutex> lk(g_requests_mu);
    g_detached.emplace_back(h, std::move(o));
    g_ndetached.fetch_add(1, std::memory_order_relaxed);
    g_owned.fetch_add(1, std::memory_order_relaxed);  // keeps the progress calls coming
  }
  *r = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

void progress_detached() {
  if (g_ndetached.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::pair<MPI_Request, Owned>> d;
  {
    std::lock_guard<std::mutex> lk(g_requests_mu);
    d.swap(g_detached);
  }
  std::vector<std::pair<MPI_Request, Owned>> keep;
  for (auto& [r, o] : d) {
    MPI_Status st;
    int flag = 0;
    const int rc = PMPI_Test(&r, &flag, &st);
    if (flag) {
      finish(o, st, rc);
      g_ndetached.fetch_sub(1, std::memory_order_relaxed);
      g_owned.fetch_sub(1, std::memory_order_relaxed);
    } else {
      keep.emplace_back(r, std::move(o));
    }
  }
  std::lock_guard<std::mutex> lk(g_requests_mu);
  for (auto& e : keep) g_detached.push_back(std::move(e));
}

}  // namespace hier::dtype
