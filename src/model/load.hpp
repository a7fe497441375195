// Reading a tune file (format libhier-tune/2, docs/tune-file.md) into a Model, and the process's
// model: HIER_TUNE_FILE when it is valid for this build and job, else the built-in model file of
// the MPI family (src/model/builtin-<family>.json, embedded at build time) after ONE warning line.
// The same file feeds the datatype engine: its "dtype" object is handed over as JSON text
// (dtype/tune.cpp reads it).
#pragma once

#include <string>

#include "model/model.hpp"
#include "model/tune_schema.hpp"  // TuneFile, JobShape, parse: the file's one schema

namespace hier::model {

// What the ranks compare at MPI_Init (core/agree_config.cpp): "built-in", or a hash of the
// accepted file's contents (not its path: node-local copies of one file agree). Ranks that plan from different models may choose different
// schedules for one call and wait on each other forever.
std::string fingerprint(const TuneFile& t);
// Replaces the process's model by the built-in one, for good (the ranks' models differ). Only at
// MPI_Init, before any collective is planned.
void force_builtin();

// The family this library was built for (from mpi.h).
Family build_family();
// The embedded built-in file and the model it gives (parsed once, cached).
const std::string& builtin_text(Family f);
const Model& builtin(Family f);

// HIER_TUNE_FILE=`path` (empty: none): the parsed file, or the built-in with `warning` set.
// No output; no MPI.
TuneFile load(const std::string& path, Family family, const JobShape& job);

// The launcher's statement of the job's shape (OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE,
// PMI_SIZE / MPI_LOCALNRANKS); {0, 0} when it says nothing or the sizes do not divide.
JobShape job_from_env();

// The process's tune file (read once: config HIER_TUNE_FILE, build_family(), job_from_env());
// the first call prints the warning, if any.
const TuneFile& process();

}  // namespace hier::model
