// The finalize report: one JSON file per rank (HIER_REPORT, %r %h %p expanded).
#pragma once

#include <string>

#include "config/config.hpp"

namespace hier::diag {

// Builds the report document as JSON text (tests and hier-info use it directly).
std::string report_json(const config::Config& cfg, int rank, int size, const std::string& mpi_library);

// Writes report_json() to the expanded HIER_REPORT path; a failure is a warning, never fatal.
void write_report(const config::Config& cfg, int rank, int size, const std::string& mpi_library);

}  // namespace hier::diag
