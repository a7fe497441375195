// A collective step running on a segment (exec/shm_steps.cpp implements the kinds): a state
// machine that polls its flags and never blocks, so that nonblocking requests progress it like
// their MPI requests, and blocking execution simply polls it to the end.
#pragma once

#include <mpi.h>

#include "shm/segment.hpp"

namespace hier::shm {

class Step {
 public:
  explicit Step(Segment& seg);  // queued on seg: steps on one segment advance in start order
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
  virtual ~Step();

  bool complete() const { return complete_; }
  int rc() const { return rc_; }

 protected:
  // As much of the step as its peers' flags allow, without waiting; true when complete.
  virtual bool poll() = 0;
  Segment& seg_;
  int rc_ = MPI_SUCCESS;  // the first error; the rounds still run (the peers wait for their flags)

 private:
  friend bool advance(Step& s);
  friend int finish(Step& s);
  bool complete_ = false;
};

// Advances the steps queued on s's segment, oldest first, up to s, without waiting; true once s
// is complete.
bool advance(Step& s);
// Advances s to completion (waiting as shm/wait.hpp says: spins, yields, then sleeps on the
// segment's bell); returns its error code.
int finish(Step& s);
// Yields before a waiter sleeps on the bell (default 64; the benchmarks compare the policies).
void set_yields_before_sleep(uint64_t n);

}  // namespace hier::shm
