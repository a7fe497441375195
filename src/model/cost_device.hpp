// The planner's costs of device-bound schedules (docs/device-buffers.md): on a communicator
// whose ranks agreed on device buffers (Context::device_hier), the local steps run as the GPU
// module's kernels, the executor waits for its stream before each message step, and on an MPI
// that is not GPU-aware (device_stage) each message step's bytes cross to pinned host memory and
// back, while the MPI's own (flat) collective runs on host copies of the whole buffers. Priced
// from the model's device rates (Model::device: the tune file's "device" section, or the
// built-ins of model/device_rates.hpp). cost() and plan() call the hooks below; on a Host model
// they add nothing.
#pragma once

#include <cstdint>

#include "model/model.hpp"
#include "sched/ir.hpp"

namespace hier::model {

// The model as a device-bound schedule meets it: placement set, local copies and the
// quantization kernels at the device rates, and libhier's measured schedules (hier_measured,
// timed on host buffers) dropped, so that the IR's costs predict the device schedule. The
// MPI's own reductions inside level steps keep the host rate (the MPI reduces where it runs).
Model on_device(const Model& m, Placement where);

// Added to a local step (a kernel): one launch and wait. 0 on a Host model.
double device_local_ns(const Model& m);
// Added to a message step of `members` members on units of `unit_bytes`: the wait for the
// module's stream before it; staged, also its bytes copied device -> host and host -> device.
double device_message_ns(const sched::Step& st, int members, int64_t unit_bytes, const Model& m);
// Added to the MPI's own collective of `bytes` (as the planner counts them) on a staged
// communicator: the whole buffers copied to host memory and back (the flat path's copies).
double device_flat_ns(config::Coll coll, int64_t bytes, int ranks, const Model& m);

}  // namespace hier::model
