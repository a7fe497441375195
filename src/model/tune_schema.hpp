// The tune file's schema (format libhier-tune/2, docs/tune-file.md), written and read in this one
// place: hier-tune fills a TuneDoc and calls write(); the loader (model/load.hpp) calls parse().
// A key added to the format is added here, to both, and the unit test model_schema_test checks
// that what write() gives, parse() reads back unchanged.
#pragma once

#include <cstddef>
#include <string>

#include "model/model.hpp"

namespace hier::model {

// Limits on what HIER_TUNE_FILE may hold: hier-tune writes some kilobytes and four levels.
inline constexpr size_t kMaxTuneBytes = 16u << 20;
inline constexpr size_t kMaxTuneDepth = 32;

// The job's shape as the launcher states it (0: unknown, then not checked).
struct JobShape {
  int nodes = 0, ranks_per_node = 0;
};

// What a file gives the process: the collectives' model and the datatype engine's object.
struct TuneFile {
  Model model;
  std::string dtype_json;  // the datatype engine's object ("dtype", or libhier-tune/1's "p2p"); empty: none
  std::string source = "built-in";
  std::string warning;     // the one line printed when HIER_TUNE_FILE was rejected; empty otherwise
  int version = 0;         // of the file read (1 or 2); 0: built-in
  std::string text;        // the accepted file's contents; empty for the built-in model
};

// Parses `text` for a build of `family` and a job of shape `job`. Sections a libhier-tune/2
// file leaves out come from `base` (the built-in model). False with a one-line `err` (no prefix)
// on any problem: the caller then uses `base`.
bool parse(const std::string& text, Family family, const JobShape& job, const Model& base, TuneFile& out,
           std::string& err);

// The machine a file was measured on (machine.*; nodes and ranks_per_node are the model's).
struct MachineInfo {
  std::string host, mpi_library, measured, tool;
};

// Figures a file carries for its reader only: the model does not use them.
struct LevelNotes {
  double pingpong_latency_ns = -1, busy_latency_ns = -1;  // < 0: not written
};

// A whole document as hier-tune writes it: the model's figures, which of the optional sections
// to write (a reader keeps the base model's figures for those left out), and the notes.
struct TuneDoc {
  MachineInfo machine;
  Model model;  // family, nodes, ranks_per_node, the levels, compute, ...
  struct Sections {
    bool intra = true, inter = true;
    bool flat_algorithms = false, margin = false, step_overhead = false, pipeline = false, steps = false;
    bool hier_measured = false, shm = false;
    bool device = false;  // the GPU module's rates (Model::device), measured where a module loads
  } has;
  LevelNotes intra_notes, inter_notes;
  int64_t quant_block = 0, quant_bytes = 0;  // where compute.quant was measured (0: not written)
  std::string dtype_json;                    // the datatype engine's object; empty: none
};

// The document as JSON text (format libhier-tune/2), ending in a newline.
std::string write(const TuneDoc& d);

}  // namespace hier::model
