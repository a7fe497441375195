// hier-tune's view of the job's nodes: ranks sharing memory (MPI_COMM_TYPE_SHARED) form a node.
#include "measure.hpp"

namespace hier::tune {

Shape shape() {
  Shape s;
  PMPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &s.size);
  PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &s.node_comm);
  PMPI_Comm_rank(s.node_comm, &s.local);
  PMPI_Comm_size(s.node_comm, &s.ppn);
  int leader = s.local == 0 ? 1 : 0;
  PMPI_Allreduce(&leader, &s.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  // node index: the number of leaders before this node's leader (world rank order)
  int before = 0;
  PMPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (s.rank == 0) before = 0;
  s.node = leader ? before : 0;
  PMPI_Bcast(&s.node, 1, MPI_INT, 0, s.node_comm);
  int mm[2] = {-s.ppn, s.ppn}, r[2];
  PMPI_Allreduce(mm, r, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  s.uniform = -r[0] == r[1];
  return s;
}

RankMap rank_map(const Shape& s) {
  RankMap m;
  m.node.resize(s.size);
  m.local.resize(s.size);
  PMPI_Allgather(&s.node, 1, MPI_INT, m.node.data(), 1, MPI_INT, MPI_COMM_WORLD);
  PMPI_Allgather(&s.local, 1, MPI_INT, m.local.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return m;
}

}  // namespace hier::tune
