#include "topo/levels.hpp"

#include "topo/discover.hpp"

namespace hier::topo {

Levels::~Levels() {
  // PMPI_Comm_free is legal here: this runs from the user communicator's attribute delete
  // callback or from the finalize hook, both before PMPI_Finalize.
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm& c : owned_)
    if (c != MPI_COMM_NULL) PMPI_Comm_free(&c);
}

std::unique_ptr<Levels> build_levels(MPI_Comm user, const config::Config& cfg) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (PMPI_Comm_dup(user, &dup) != MPI_SUCCESS) return nullptr;
  auto lv = std::make_unique<Levels>();
  PMPI_Comm_rank(dup, &lv->rank);
  PMPI_Comm_size(dup, &lv->size);
  lv->shape = analyze(discover(dup, cfg));
  const Shape& s = lv->shape;
  if (!s.hierarchical()) {
    PMPI_Comm_free(&dup);
    return nullptr;
  }
  auto split = [&](int color, int key) {
    MPI_Comm c = MPI_COMM_NULL;
    PMPI_Comm_split(dup, color, key, &c);
    if (c != MPI_COMM_NULL) lv->owned_.push_back(c);
    return c;
  };
  const int r = lv->rank;
  if (s.cartesian) {
    const int n = s.nlevels();
    for (int j = 0; j < n; ++j) {
      // Colour: my position with coordinate j set to zero (the same for all who differ only in j).
      int color = 0;
      for (int i = 0; i < n; ++i) color = color * s.dims[i] + (i == j ? 0 : s.coord(r, i));
      lv->step.push_back(split(color, s.coord(r, j)));
    }
    lv->cross = lv->step[n - 1];
    lv->node = n == 2 ? lv->step[0] : split(s.coord(r, n - 1), s.node_position(r));
    // Leaders (node position 0) are exactly the cross communicator of position 0.
    lv->leaders = s.node_position(r) == 0 ? lv->cross : MPI_COMM_NULL;
  } else {
    lv->node = split(s.node_of[r], s.local_of[r]);
    MPI_Comm leaders = MPI_COMM_NULL;
    PMPI_Comm_split(dup, s.local_of[r] == 0 ? 0 : MPI_UNDEFINED, s.node_of[r], &leaders);
    if (leaders != MPI_COMM_NULL) lv->owned_.push_back(leaders);
    lv->leaders = leaders;
  }
  PMPI_Comm_free(&dup);
  return lv;
}

}  // namespace hier::topo
