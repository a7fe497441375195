// Hierarchical collectives from several threads at once (MPI_THREAD_MULTIPLE), each thread on its
// own duplicate of MPI_COMM_WORLD: every MPI_* call (through the preloaded libhier) is repeated
// as PMPI_* (the MPI alone) on the same data, and the whole receive buffers must be equal byte for
// byte, holes of non-contiguous types included. Integer data only, so every result is exact.
// The datatypes are shared by all threads: dense int, vector(2,1,2,int) and a resized struct
// (libhier's datatype engine), MPI_SHORT_INT (predefined but not dense: PMPI_Pack fallback).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;

// THREADS_TEST_ITERS rounds (default 10: MPICH takes ~2 s a round, oversubscribed); THREADS_TEST_LARGE=0 leaves out the one large round
// (the ThreadSanitizer run: instrumented copies of megabytes cost tens of seconds there).
int iterations() {
  const char* e = std::getenv("THREADS_TEST_ITERS");
  return e && std::atoi(e) > 0 ? std::atoi(e) : 10;
}
bool large_round() {
  const char* e = std::getenv("THREADS_TEST_LARGE");
  return !e || std::atoi(e) != 0;
}

// Adds the ints of vector(2, 1, 2, int) elements (12-byte extent, a hole in the middle). Unsigned:
// wrapping sums are exact in any order.
void vec_add(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  for (int i = 0; i < *len; ++i)
    for (int off : {0, 8}) {
      unsigned x, y;
      std::memcpy(&x, a + 12 * i + off, 4);
      std::memcpy(&y, b + 12 * i + off, 4);
      y += x;
      std::memcpy(b + 12 * i + off, &y, 4);
    }
}

struct Kind {
  const char* name;
  MPI_Datatype type;
  MPI_Op op;  // for reductions; MPI_OP_NULL: data movement only
  MPI_Aint extent;
};

struct Types {
  MPI_Datatype ivec = MPI_DATATYPE_NULL, rstruct = MPI_DATATYPE_NULL;
  MPI_Op vadd = MPI_OP_NULL;
  std::vector<Kind> kinds;
  Types() {
    MPI_Type_vector(2, 1, 2, MPI_INT, &ivec);
    MPI_Type_commit(&ivec);
    // {int at 0, short at 6}, extent 12: holes inside and after each element.
    MPI_Datatype s;
    const int lens[] = {1, 1};
    const MPI_Aint displs[] = {0, 6};
    const MPI_Datatype types[] = {MPI_INT, MPI_SHORT};
    MPI_Type_create_struct(2, lens, displs, types, &s);
    MPI_Type_create_resized(s, 0, 12, &rstruct);
    MPI_Type_free(&s);
    MPI_Type_commit(&rstruct);
    MPI_Op_create(vec_add, 1, &vadd);
    kinds = {{"int/sum", MPI_INT, MPI_SUM, 4},
             {"vector/user-add", ivec, vadd, 12},
             {"short-int/maxloc", MPI_SHORT_INT, MPI_MAXLOC, 8},
             {"resized-struct", rstruct, MPI_OP_NULL, 12}};
  }
  ~Types() {
    MPI_Type_free(&ivec);
    MPI_Type_free(&rstruct);
    MPI_Op_free(&vadd);
  }
};

// Deterministic bytes for (rank, thread, iteration, salt); holes get bytes too (never read).
std::vector<unsigned char> bytes(size_t n, int rank, int thread, int iter, int salt) {
  std::vector<unsigned char> v(n);
  uint32_t x = 0x9e3779b9u * static_cast<uint32_t>(rank + 1) ^ static_cast<uint32_t>(thread * 7919 + iter * 104729 + salt);
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

// One thread's run: records the first mismatches (assertions stay on the main thread).
class Worker {
 public:
  Worker(int thread, MPI_Comm comm, const Types& types) : t_(thread), comm_(comm), types_(types) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  void run(int iters) {
    const bool large = large_round();
    for (int i = 0; i < iters; ++i)
      for (const Kind& k : types_.kinds) {
        if (i == 3 && large) {  // once: over 1 MiB per buffer, so local copies run in several rounds
          const int big = 150001 + t_;
          if (k.op != MPI_OP_NULL) allreduce(k, i, big);
          bcast(k, i, big);
          continue;
        }
        const int n = 1 + (i * 5 + t_ * 3) % 23;  // the same on every rank
        if (k.op != MPI_OP_NULL) {
          allreduce(k, i, n);
          reduce_scatter_block(k, i, n);
        }
        bcast(k, i, n);
        allgather(k, i, n);
        alltoall(k, i, n);
      }
  }

  std::vector<std::string> failures;

 private:
  size_t span(const Kind& k, int64_t n) const { return static_cast<size_t>(n * k.extent); }

  void expect_equal(const char* coll, const Kind& k, int iter, int n, int rc, int prc,
                    const std::vector<unsigned char>& got, const std::vector<unsigned char>& want) {
    if (failures.size() >= 8) return;
    std::string where = std::string(coll) + " " + k.name + " thread " + std::to_string(t_) + " iter " +
                        std::to_string(iter) + " count " + std::to_string(n);
    if (rc != MPI_SUCCESS || prc != MPI_SUCCESS) {
      failures.push_back(where + ": rc " + std::to_string(rc) + ", PMPI rc " + std::to_string(prc));
      return;
    }
    for (size_t b = 0; b < got.size(); ++b)
      if (got[b] != want[b]) {
        failures.push_back(where + ": byte " + std::to_string(b) + " is " + std::to_string(got[b]) + ", PMPI gives " +
                           std::to_string(want[b]));
        return;
      }
  }

  void allreduce(const Kind& k, int i, int n) {
    auto send = bytes(span(k, n), rank_, t_, i, 1);
    auto out = bytes(span(k, n), 0, t_, i, 2), ref = out;  // same pre-fill: holes must stay
    int rc = MPI_Allreduce(send.data(), out.data(), n, k.type, k.op, comm_);
    int prc = PMPI_Allreduce(send.data(), ref.data(), n, k.type, k.op, comm_);
    expect_equal("Allreduce", k, i, n, rc, prc, out, ref);
  }

  void reduce_scatter_block(const Kind& k, int i, int n) {
    auto send = bytes(span(k, int64_t{n} * size_), rank_, t_, i, 3);
    auto out = bytes(span(k, n), 0, t_, i, 4), ref = out;
    int rc = MPI_Reduce_scatter_block(send.data(), out.data(), n, k.type, k.op, comm_);
    int prc = PMPI_Reduce_scatter_block(send.data(), ref.data(), n, k.type, k.op, comm_);
    expect_equal("Reduce_scatter_block", k, i, n, rc, prc, out, ref);
  }

  void bcast(const Kind& k, int i, int n) {
    const int root = (i + t_) % size_;
    auto out = rank_ == root ? bytes(span(k, n), rank_, t_, i, 5) : bytes(span(k, n), 0, t_, i, 6);
    auto ref = out;
    int rc = MPI_Bcast(out.data(), n, k.type, root, comm_);
    int prc = PMPI_Bcast(ref.data(), n, k.type, root, comm_);
    expect_equal("Bcast", k, i, n, rc, prc, out, ref);
  }

  void allgather(const Kind& k, int i, int n) {
    auto send = bytes(span(k, n), rank_, t_, i, 7);
    auto out = bytes(span(k, int64_t{n} * size_), 0, t_, i, 8), ref = out;
    int rc = MPI_Allgather(send.data(), n, k.type, out.data(), n, k.type, comm_);
    int prc = PMPI_Allgather(send.data(), n, k.type, ref.data(), n, k.type, comm_);
    expect_equal("Allgather", k, i, n, rc, prc, out, ref);
  }

  void alltoall(const Kind& k, int i, int n) {
    auto send = bytes(span(k, int64_t{n} * size_), rank_, t_, i, 9);
    auto out = bytes(span(k, int64_t{n} * size_), 0, t_, i, 10), ref = out;
    int rc = MPI_Alltoall(send.data(), n, k.type, out.data(), n, k.type, comm_);
    int prc = PMPI_Alltoall(send.data(), n, k.type, ref.data(), n, k.type, comm_);
    expect_equal("Alltoall", k, i, n, rc, prc, out, ref);
  }

  int t_, rank_ = 0, size_ = 1;
  MPI_Comm comm_;
  const Types& types_;
};

TEST(Threads, CollectivesOnFourCommunicatorsAtOnce) {
  Types types;
  MPI_Comm comms[kThreads];
  for (MPI_Comm& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);  // collective: in order, before the threads
  std::vector<Worker> workers;
  for (int t = 0; t < kThreads; ++t) workers.emplace_back(t, comms[t], types);
  const int iters = iterations();
  std::vector<std::thread> threads;
  for (Worker& w : workers) threads.emplace_back([&w, iters] { w.run(iters); });
  for (std::thread& th : threads) th.join();
  for (const Worker& w : workers)
    for (const std::string& f : w.failures) ADD_FAILURE() << f;
  for (MPI_Comm& c : comms) MPI_Comm_free(&c);
}

}  // namespace
