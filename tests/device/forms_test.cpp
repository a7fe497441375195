// Device-buffer collectives in every form libhier rewrites on a Context::device_hier
// communicator (a GPU-aware MPI and the GPU module on every rank: here the stand-in MPI,
// FAKE_GPU_AWARE=1, and the simulated device's module): blocking, nonblocking (several requests
// outstanding at once, completed together) and persistent (MPI 4.0), for the reductions and for
// alltoall / gather / scatter / allgatherv / allgather / bcast. Each call's device result must be,
// byte for byte, the MPI's own (PMPI) on host copies of the same integers; float sums must be the
// bits of the same call, in the same form, on host buffers through libhier (the same schedule).
// Counts 0, 1, 7 and 65537 (4099 too for the float sums), in place, roots 0 and the last rank.
// Host code never touches the device buffers (the simulated device faults); a missing wait for the module's stream gives
// stale results (its worker threads wait before each operation). The report check
// (check_forms_report.py) proves the calls ran libhier's schedules on the device buffers.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "../support/world.hpp"
#include "dev_buffer.hpp"
#include "forms.hpp"

namespace {

using hier::test::Dev;

using hier::test::rank_;
using hier::test::size_;

std::vector<int> ints(size_t n, int salt) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i * 7919 + salt * 104729 + 3);
  return v;
}
template <class T>
std::vector<char> bytes(const std::vector<T>& v) {
  std::vector<char> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One collective on device buffers: `expect` is what this rank's result buffer must hold (empty
// `check`: the rank has no result, as a reduce's non-root).
struct Case {
  std::string what;
  std::unique_ptr<Dev> send, recv;
  std::vector<char> expect;
  bool check = true;
  std::function<int(Form, MPI_Request*)> issue;
};
using Maker = std::function<Case(int n, int root, bool in_place)>;

std::unique_ptr<Dev> dev(const std::vector<char>& v) { return std::make_unique<Dev>(v); }

// The collectives, each with its PMPI reference on host copies. n: the per-rank count.
const std::vector<std::pair<const char*, Maker>>& makers() {
  static const std::vector<std::pair<const char*, Maker>> all = {
      {"allreduce",
       [](int n, int, bool ip) {
         Case c;
         const auto in = ints(n, rank_());
         std::vector<int> ref(n);
         PMPI_Allreduce(in.data(), ref.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(ip ? in : std::vector<int>(n)));
         c.expect = bytes(ref);
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) { return ISSUE(Allreduce, Iallreduce, s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD); };
         return c;
       }},
      {"reduce",
       [](int n, int root, bool ip) {
         Case c;
         const bool me = rank_() == root;
         ip = ip && me;
         const auto in = ints(n, rank_());
         std::vector<int> ref(n);
         PMPI_Reduce(in.data(), ref.data(), n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(ip ? in : std::vector<int>(n)));
         c.expect = bytes(ref);
         c.check = me;
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) { return ISSUE(Reduce, Ireduce, s, r, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD); };
         return c;
       }},
      {"reduce_scatter_block",
       [](int n, int, bool ip) {
         Case c;
         const int p = size_();
         const auto in = ints(size_t(n) * p, rank_());
         std::vector<int> ref(n);
         PMPI_Reduce_scatter_block(in.data(), ref.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(ip ? in : std::vector<int>(n)));
         c.expect = bytes(ref);
         c.expect.resize(size_t(n) * sizeof(int));
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         if (ip) c.recv->n = size_t(n) * sizeof(int);  // in place: the result is the first block
         c.issue = [=](Form f, MPI_Request* q) {
           return ISSUE(Reduce_scatter_block, Ireduce_scatter_block, s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
         };
         return c;
       }},
      {"reduce_scatter",
       [](int n, int, bool) {
         Case c;
         const int p = size_();
         auto counts = std::make_shared<std::vector<int>>(p);
         for (int i = 0; i < p; ++i) (*counts)[i] = n + (i % 2);  // uneven blocks
         const int total = std::accumulate(counts->begin(), counts->end(), 0);
         const auto in = ints(total, rank_());
         std::vector<int> ref((*counts)[rank_()]);
         PMPI_Reduce_scatter(in.data(), ref.data(), counts->data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(std::vector<int>(ref.size())));
         c.expect = bytes(ref);
         const void* s = c.send->p;
         void* r = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) {
           return ISSUE(Reduce_scatter, Ireduce_scatter, s, r, counts->data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
         };
         return c;
       }},
      {"allgather",
       [](int n, int, bool ip) {
         Case c;
         const int p = size_(), me = rank_();
         const auto in = ints(n, me);
         std::vector<int> ref(size_t(n) * p);
         PMPI_Allgather(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, MPI_COMM_WORLD);
         std::vector<int> start(size_t(n) * p);
         if (ip) std::copy(in.begin(), in.end(), start.begin() + size_t(n) * me);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(start));
         c.expect = bytes(ref);
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) { return ISSUE(Allgather, Iallgather, s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD); };
         return c;
       }},
      {"allgatherv",
       [](int n, int, bool ip) {
         Case c;
         const int p = size_(), me = rank_();
         auto counts = std::make_shared<std::vector<int>>(p), displs = std::make_shared<std::vector<int>>(p);
         for (int i = 0; i < p; ++i) (*counts)[i] = n + (i % 3 == 1 ? 2 : 0);
         // blocks in reverse rank order, a gap of 3 between them
         for (int i = p - 1, d = 0; i >= 0; --i) (*displs)[i] = d, d += (*counts)[i] + 3;
         const int span = (*displs)[0] + (*counts)[0];
         const auto in = ints((*counts)[me], me);
         std::vector<int> ref(span, -1), start(span, -1);
         PMPI_Allgatherv(in.data(), (*counts)[me], MPI_INT, ref.data(), counts->data(), displs->data(), MPI_INT,
                         MPI_COMM_WORLD);
         if (ip) std::copy(in.begin(), in.end(), start.begin() + (*displs)[me]);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(start));
         c.expect = bytes(ref);
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         const int sc = (*counts)[me];
         c.issue = [=](Form f, MPI_Request* q) {
           return ISSUE(Allgatherv, Iallgatherv, s, sc, MPI_INT, r, counts->data(), displs->data(), MPI_INT, MPI_COMM_WORLD);
         };
         return c;
       }},
      {"bcast",
       [](int n, int root, bool) {
         Case c;
         const auto in = ints(n, 77);
         c.recv = dev(bytes(rank_() == root ? in : std::vector<int>(n)));
         c.expect = bytes(in);
         void* b = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) { return ISSUE(Bcast, Ibcast, b, n, MPI_INT, root, MPI_COMM_WORLD); };
         return c;
       }},
      {"alltoall",
       [](int n, int, bool ip) {
         Case c;
         const int p = size_();
         const auto in = ints(size_t(n) * p, rank_());
         std::vector<int> ref(size_t(n) * p);
         PMPI_Alltoall(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, MPI_COMM_WORLD);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(ip ? in : std::vector<int>(size_t(n) * p)));
         c.expect = bytes(ref);
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) { return ISSUE(Alltoall, Ialltoall, s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD); };
         return c;
       }},
      {"gather",
       [](int n, int root, bool ip) {
         Case c;
         const int p = size_(), me = rank_();
         ip = ip && me == root;
         const auto in = ints(n, me);
         std::vector<int> ref(size_t(n) * p), start(size_t(n) * p);
         PMPI_Gather(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, root, MPI_COMM_WORLD);
         if (ip) std::copy(in.begin(), in.end(), start.begin() + size_t(n) * me);
         c.send = dev(bytes(in));
         c.recv = dev(bytes(start));
         c.expect = bytes(ref);
         c.check = me == root;
         const void* s = ip ? MPI_IN_PLACE : c.send->p;
         void* r = c.recv->p;
         c.issue = [=](Form f, MPI_Request* q) {
           return ISSUE(Gather, Igather, s, n, MPI_INT, r, n, MPI_INT, root, MPI_COMM_WORLD);
         };
         return c;
       }},
      {"scatter",
       [](int n, int root, bool ip) {
         Case c;
         const int p = size_(), me = rank_();
         ip = ip && me == root;
         const auto in = ints(size_t(n) * p, 55);  // the root's
         std::vector<int> ref(n);
         PMPI_Scatter(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, root, MPI_COMM_WORLD);
         c.send = dev(bytes(me == root ? in : std::vector<int>{}));
         // In place, the root's block stays where it is in the send buffer: check that.
         c.recv = dev(bytes(std::vector<int>(n)));
         c.expect = bytes(ref);
         const void* s = c.send->p;
         void* r = ip ? MPI_IN_PLACE : c.recv->p;
         if (ip) {  // what is checked: the root's send buffer, up to its own block, unchanged
           c.recv.swap(c.send);
           c.recv->n = size_t(n) * sizeof(int) * (me + 1);
           const auto all = bytes(in);
           c.expect.assign(all.begin(), all.begin() + c.recv->n);
         }
         c.issue = [=](Form f, MPI_Request* q) {
           return ISSUE(Scatter, Iscatter, s, n, MPI_INT, r, n, MPI_INT, root, MPI_COMM_WORLD);
         };
         return c;
       }},
  };
  return all;
}

constexpr int kCounts[] = {0, 1, 7, 65537};  // 7 and 65537 are primes
bool rooted(const std::string& name) { return name == "reduce" || name == "bcast" || name == "gather" || name == "scatter"; }
bool has_in_place(const std::string& name) { return name != "bcast" && name != "reduce_scatter"; }

void expect_result(const Case& c, const std::string& where) {
  if (!c.check) return;
  EXPECT_TRUE(c.recv->get() == c.expect) << c.what << ", " << where;
}

// Blocking and nonblocking: every collective, count, root and in-place choice.
TEST(DeviceForms, OneAtATime) {
  const int roots[] = {0, size_() - 1};
  for (Form f : {Form::Blocking, Form::Nonblocking})
    for (const auto& [name, make] : makers())
      for (int n : kCounts)
        for (int root : roots)
          for (bool ip : {false, true}) {
            if ((root != roots[0] && !rooted(name)) || (ip && !has_in_place(name))) continue;
            Case c = make(n, root, ip);
            c.what = name;
            const std::string where = std::string(name_of(f)) + " n=" + std::to_string(n) +
                                      " root=" + std::to_string(root) + (ip ? " in place" : "");
            MPI_Request q = MPI_REQUEST_NULL;
            ASSERT_EQ(c.issue(f, &q), MPI_SUCCESS) << c.what << ", " << where;
            if (f == Form::Nonblocking) {
              ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
            }
            expect_result(c, where);
          }
}

// Several requests outstanding at once: every collective of one count started, then completed
// together (by MPI_Waitall, in reverse order of issue: the engine still issues in order).
TEST(DeviceForms, ManyOutstanding) {
  for (int n : kCounts) {
    std::vector<Case> cases;
    for (const auto& [name, make] : makers()) {
      cases.push_back(make(n, size_() - 1, false));
      cases.back().what = name;
      if (!has_in_place(name)) continue;
      cases.push_back(make(n, 0, true));
      cases.back().what = std::string(name) + " in place";
    }
    std::vector<MPI_Request> q(cases.size(), MPI_REQUEST_NULL);
    for (size_t i = 0; i < cases.size(); ++i)
      ASSERT_EQ(cases[i].issue(Form::Nonblocking, &q[i]), MPI_SUCCESS) << cases[i].what << " n=" << n;
    std::vector<MPI_Request> rev(q.rbegin(), q.rend());
    ASSERT_EQ(MPI_Waitall(static_cast<int>(rev.size()), rev.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
    for (const Case& c : cases) expect_result(c, "outstanding together, n=" + std::to_string(n));
  }
}

// Persistent (MPI 4.0): each started twice, the result buffer restored to its first contents
// between the starts. Every collective libhier rewrites on device buffers, movement ones
// included (their device-bound schedules, exec/device_steps.hpp), counts above 0 only: a count
// of 0 goes to MPICH 4.0.2's own persistent collectives, which hang in MPI_Wait on the stand-in's
// device buffers even without libhier (allreduce of 1 int on 4 ranks), and work on host buffers.
TEST(DeviceForms, Persistent) {
#if MPI_VERSION >= 4
  for (const auto& [name, make] : makers()) {
    const std::string nm = name;
    for (int n : kCounts)
      for (bool ip : {false, true}) {
        if (n == 0 || (ip && !has_in_place(nm))) continue;
        Case c = make(n, size_() - 1, ip);
        c.what = name;
        const std::string where = "persistent n=" + std::to_string(n) + (ip ? " in place" : "");
        // The result buffer's first contents (in place the input; a bcast root's data; gaps):
        // restored before the second start, which must write the result again.
        const std::vector<char> start = c.recv->get();
        MPI_Request q = MPI_REQUEST_NULL;
        ASSERT_EQ(c.issue(Form::Persistent, &q), MPI_SUCCESS) << c.what << ", " << where;
        for (int round = 0; round < 2; ++round) {
          ASSERT_EQ(MPI_Start(&q), MPI_SUCCESS);
          ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
          expect_result(c, where + " start " + std::to_string(round));
          fake_gpu_copy(c.recv->p, start.data(), start.size());
        }
        ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
      }
  }
#else
  GTEST_SKIP() << "persistent collectives need an MPI 4.0 library";
#endif
}

// Persistent calls whose buffers a rank cannot bind on the device (here: sent from device
// memory, received into host memory, on every rank): the schedule runs on host copies that the
// request keeps, refreshed from the device at every MPI_Start (core/dispatch_coll.hpp,
// persistent_staged). The input changes between the starts: a start that read stale copies fails.
TEST(DeviceForms, PersistentMixedHostAndDevice) {
#if MPI_VERSION >= 4
  const int p = size_();
  for (int n : {7, 65537}) {
    Dev send(bytes(ints(n, rank_())));
    std::vector<int> recv(size_t(n) * p, -1), ref(size_t(n) * p);
    MPI_Request q = MPI_REQUEST_NULL;
    ASSERT_EQ(MPI_Allgather_init(send.p, n, MPI_INT, recv.data(), n, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &q),
              MPI_SUCCESS);
    for (int round = 0; round < 2; ++round) {
      const auto in = ints(n, rank_() + 10 * round);
      fake_gpu_copy(send.p, in.data(), in.size() * sizeof(int));
      std::fill(recv.begin(), recv.end(), -1);
      ASSERT_EQ(MPI_Start(&q), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
      PMPI_Allgather(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, MPI_COMM_WORLD);
      EXPECT_EQ(recv, ref) << "persistent allgather, device send, host recv, n=" << n << " start " << round;
    }
    ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
  }
#else
  GTEST_SKIP() << "persistent collectives need an MPI 4.0 library";
#endif
}

// Float sums: the device result is the bits of the same call on host buffers through libhier.
TEST(DeviceForms, FloatSumsMatchHostCall) {
  for (Form f : {Form::Blocking, Form::Nonblocking, Form::Persistent}) {
#if MPI_VERSION < 4
    if (f == Form::Persistent) continue;
#endif
    for (int n : {0, 1, 7, 4099, 65537}) {
      if (f == Form::Persistent && n == 0) continue;  // to MPICH's own (see Persistent)
      std::vector<float> in(n), ref(n, 0.0f);
      for (int i = 0; i < n; ++i) in[i] = static_cast<float>((i * 37 + rank_() * 11) % 1000) * 0.01f - 3.0f;
      Dev s(bytes(in)), r(bytes(ref));
      MPI_Request req = MPI_REQUEST_NULL;
      auto call = [&](const void* sb, void* rb) {
        MPI_Request* q = &req;
        const int rc = ISSUE(Allreduce, Iallreduce, sb, rb, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS || f == Form::Blocking) return rc;
        if (f == Form::Persistent && MPI_Start(q) != MPI_SUCCESS) return MPI_ERR_OTHER;
        const int w = MPI_Wait(q, MPI_STATUS_IGNORE);
        if (f == Form::Persistent) MPI_Request_free(q);
        return w;
      };
      ASSERT_EQ(call(in.data(), ref.data()), MPI_SUCCESS);
      ASSERT_EQ(call(s.p, r.p), MPI_SUCCESS);
      EXPECT_TRUE(r.get() == bytes(ref)) << name_of(f) << " float sum, count " << n;
    }
  }
}

}  // namespace
