// The bytes libhier's staged message steps copy between device and host memory, for the report's
// device section ("staged_bytes", kept with its other counts in device/pointer.cpp).
#pragma once

#include <cstdint>

namespace hier::device {

// Counts the bytes one staged message step (exec/device_stage.hpp) copied: `to_host` before the
// message, else back after it; `records` for the steps of a quantized schedule that move records
// (sched::Step::bytes), values for the others. It shows that only the records of a staged
// quantized call cross to the host (tests/device/check_quant_report.py).
void note_staged_bytes(bool to_host, bool records, int64_t bytes);

}  // namespace hier::device
