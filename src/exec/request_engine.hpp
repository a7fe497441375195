// The progress engine's state shared inside exec/ (never included outside it): exec/request.cpp
// runs the engine, exec/persistent.cpp keeps the persistent collectives, and
// exec/request_completion.cpp is what the program's completion calls use.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "exec/request.hpp"

namespace hier::exec {

// A persistent collective: its request (schedule, binding, memory) kept between starts.
struct Persistent {
  std::unique_ptr<CollRequest> r;
  MPI_Request handle = MPI_REQUEST_NULL;  // the program's: an inactive persistent request of the MPI
  MPI_Request current = MPI_REQUEST_NULL; // the generalized request of the current start
  bool started = false;  // started, and no completion call has seen it complete yet
  bool running = false;  // its schedule runs (in g_active)
  bool freed = false;    // MPI_Request_free while running: deleted when it finishes
};

namespace engine {

// Every outstanding request in the order the program started them. g_mu guards it, the
// contexts' request fields, every Machine and the persistent requests (exec/persistent.cpp);
// PMPI_Grequest_complete is called without it.
extern std::mutex g_mu;
extern std::vector<CollRequest*> g_active;
extern std::atomic<int> g_nactive;

// Handles of libhier's requests not yet freed by the MPI (MPI_Cancel asks). Its own lock: the
// MPI calls free_fn from inside its completion calls.
extern std::mutex g_hmu;
extern std::unordered_set<MPI_Request> g_handles;

// Seconds the program spent in completion calls while requests were outstanding (the report's wait_s).
extern std::atomic<double> g_wait_s;
extern std::atomic<bool> g_thread_on;  // the progress thread runs (read without a lock by the p2p calls)

// a += v, atomically.
void add(std::atomic<double>& a, double v);
// Once: the report section and the finalize hook; the progress thread where HIER_PROGRESS=thread.
void setup_once();
// Wakes the progress thread (if it runs) to look for work.
void wake_thread();
// Starts r (owned by the caller until it is in g_active).
int launch(CollRequest* r, MPI_Request* out);
// Gives back what r held for its lifetime: frees its duplicated datatypes (hold_type) and drops
// its reference to a user-defined op (hold_op), freeing the op when the program already did.
void release_held(CollRequest* r);
// Advances every request and completes the handles of those that finished. Returns the groups
// started plus the requests completed (0: nothing moved).
size_t progress_round();
// Whether requests are outstanding on ctx.
bool active_on(Context* ctx);
// Inside a PersistentInit scope: keeps r as a persistent request, the program's handle in *out
// (exec/persistent.cpp).
int make_persistent(std::unique_ptr<CollRequest> r, MPI_Request* out);
// Under g_mu, as persistent request r goes: drops its hold on its context; returns the context
// when it was the last hold of one whose communicator is freed (the caller deletes it, unlocked).
Context* drop_context(CollRequest* r);

}  // namespace engine
}  // namespace hier::exec
