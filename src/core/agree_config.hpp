// The configuration that must be the same on every rank (registry: same_on_every_rank), compared
// once at MPI_Init, and the machine model every rank loaded (HIER_TUNE_FILE). A launcher that forwards the environment to some hosts only is enough to make
// ranks differ, and ranks that plan differently wait on each other forever.
#pragma once

namespace hier::core {

// Collective over MPI_COMM_WORLD: one allreduce of a hash per variable (and, only on a mismatch,
// a broadcast of the differing values). On a mismatch rank 0 prints one line per variable naming
// two ranks and their values; then every rank runs every collective flat, or with HIER_STRICT=1
// the job stops. Models that differ: every rank plans with the built-in model. Returns false when
// the job must stop.
bool agree_config(int world_rank);

// After agree_config: whether some agreed variable differed between ranks (the same answer on
// every rank). Setup that needs every rank, like the watchdog's side channel, is skipped then:
// a rank disabled alone would otherwise skip a collective its peers make.
bool config_differs();

}  // namespace hier::core
