// Test-only failure injection at the points where libhier acquires something that can fail
// locally (level communicators, a schedule, scratch memory). libhier itself never defines the
// hook: a test program defines (and exports) `hier_test_inject`, and only then can a point fail.
// In a production run the weak reference is null and each point costs one predictable branch,
// on cold paths only (communicator setup, schedule-cache misses).
#pragma once

extern "C" __attribute__((weak, visibility("default"))) int hier_test_inject(const char* point);

namespace hier::util {

// Whether the test asks `point` ("levels", "plan", "scratch"; "shm": mapping a level
// communicator's shared segment (HIER_SHM); "device_scratch": device scratch at a schedule's
// miss (exec/device_steps.hpp); "device_stage": the pinned staging of a device-bound schedule's
// message steps at its miss (exec/device_stage.hpp); "run": a schedule's run returns an
// error; "p2p_progress": a blocking point-to-point call does not advance the outstanding
// nonblocking collectives, to show that their test stalls without it; "op_free": MPI_Op_free
// frees a user op at once even while libhier's pending requests use it, to show that the tests of
// the deferred free fail without it; "type_hold": a request keeps the program's datatype handle
// instead of a duplicate, idem for the datatypes) to fail on this rank now.
// The hook may also throw, to test the wrappers' catch.
inline bool injected_failure(const char* point) { return hier_test_inject != nullptr && hier_test_inject(point) != 0; }

}  // namespace hier::util
