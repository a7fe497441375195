// Progress for the MPI's own nonblocking collectives, under HIER_PROGRESS=thread+mpi.
// A nonblocking collective that runs as the MPI's own call (the plan left it flat, or libhier
// does not rewrite it) advances, in Open MPI 4.1 and MPICH 4.0 as built here, only inside the
// program's MPI calls: a program that starts MPI_Iallreduce and computes until MPI_Wait overlaps
// nothing (bench/RESULTS.md: 0-13 % of a 16 MiB MPI_Iallreduce on the emulated cluster, 69-77 %
// with an MPI_Test every 0.1-1 ms). libhier's progress thread, which advances libhier's own
// requests, also makes one progress call of the MPI (a probe that takes nothing) every few
// milliseconds while such a request is outstanding and no program thread waits, so the MPI's own
// algorithm runs behind the computation too. Not part of HIER_PROGRESS=thread: measured on the
// emulated cluster (8 ranks on 2 cores, bench/RESULTS.md) it hides most of a lone MPI_Iallreduce
// behind computation (Open MPI), but slowed tools/demo.sh --overlap (one MPI_Iallreduce per
// layer during backward) by about 14 %: the MPI work the probes run takes the computation's cores.
// Which requests are outstanding: the handles the nonblocking collective wrappers returned
// (track), dropped when a completion call of the program (or MPI_Request_free) nulls their slot
// (settle). A handle that none of them sees complete is dropped after kStale seconds: its
// progress then waits for the program's calls, as without libhier.
#pragma once

#include <mpi.h>

#include <vector>

namespace hier::exec::own_progress {

// After a nonblocking collective of the MPI's own started with handle r (MPI_REQUEST_NULL or
// one of libhier's requests: ignored). Does nothing unless HIER_PROGRESS=thread+mpi and the
// progress thread runs (MPI_THREAD_MULTIPLE); starts it on the first call otherwise.
void track(MPI_Request r);
// Whether any handle is tracked (one relaxed load: the completion calls' fast path).
bool any();
// The completion call that took `before` (the slots' handles ahead of it) left `after[0..n)`:
// tracked handles whose slot is now MPI_REQUEST_NULL completed or were freed.
void settle(const std::vector<MPI_Request>& before, const MPI_Request* after, int n);
// The progress thread's side: whether a round should poke the MPI (handles tracked, and no
// program thread inside a blocking completion call, which progresses them itself), and the poke.
bool wanted();
void poke();
// A program thread inside a blocking completion call (MPI_Wait*, for its lifetime).
struct Waiting {
  Waiting();
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
};
// The report's figures: handles tracked so far, and pokes made.
long tracked_total();
long pokes_total();

}  // namespace hier::exec::own_progress
