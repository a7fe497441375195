// Seeded generator of random valid derived datatypes (Yaksa dtpools in spirit): every MPI
// constructor, nesting depth <= 4, negative strides and displacements, resized extents
// smaller and larger than the data, gaps, zero-size members, darrays of random process grids.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <random>
#include <string>

namespace hier::test {

struct GenOptions {
  int max_depth = 4;
  int64_t max_size = 16 * 1024;      // packed bytes per element
  int64_t max_span = 256 * 1024;     // true extent
  bool allow_resized_overlap = true; // extents smaller than the data (elements overlap)
};

class TypeGen {
 public:
  explicit TypeGen(uint64_t seed, GenOptions o = {}) : rng_(seed), o_(o) {}
  // A committed (through MPI_Type_commit) derived or predefined type; `desc` says how it was
  // built. The caller frees it (if not predefined).
  MPI_Datatype next(std::string& desc);
  std::mt19937_64& rng() { return rng_; }

 private:
  MPI_Datatype gen(int depth, std::string& desc);
  MPI_Datatype base(std::string& desc);
  int64_t uni(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool ok(MPI_Datatype t) const;
  std::mt19937_64 rng_;
  GenOptions o_;
};

bool is_predefined(MPI_Datatype t);
void free_type(MPI_Datatype& t);

}  // namespace hier::test
