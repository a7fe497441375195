#include "topo/levels.hpp"

#include <algorithm>

#include "diag/log.hpp"
#include "topo/discover.hpp"
#include "util/inject.hpp"

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

namespace {

// The planner's auto mode needs to know whether the levels cross physical nodes.
bool wants_physical(const config::Config& cfg) {
  for (config::Algo a : cfg.algo)
    if (a == config::Algo::Auto) return true;
  return false;
}

// HIER_SHM: a segment for each level communicator inside a node (Shape::inside_node) of 2
// members or more whose members share memory, then one agreement: a member that could not map one means no segment on any rank.
// Every rank visits its communicators in the order they were created (as their creation did),
// so the collectives over each never wait on each other in a cycle. The names are unlinked once
// every member has mapped them: a rank killed later leaves nothing in /dev/shm.
void attach_segments(Levels& lv, const std::vector<MPI_Comm>& comms) {
  bool failed = false;
  for (MPI_Comm c : comms) {
    int n = 0;
    PMPI_Comm_size(c, &n);
    if (n < 2 || lv.segment(c) || !shm::members_share_memory(c)) continue;
    bool f = false;
    auto seg = shm::open_segment(c, shm::kHalfBytes, &f);
    failed |= f;
    if (seg) lv.segments.emplace_back(c, std::move(seg));
  }
  int any = failed ? 1 : 0;
  if (PMPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, lv.internal) != MPI_SUCCESS) any = 1;
  if (any) {
    if (failed) HIER_INFO("shm", "this rank could not map a shared segment: level steps as messages on every rank");
    lv.segments.clear();  // unlinks and unmaps
    return;
  }
  for (auto& [c, seg] : lv.segments) seg->unlink_name();
}

// Tags of PMPI_Comm_create_group, one per kind of level communicator.
constexpr int kTagStep = 0x4869, kTagNode = 0x4869 + 64, kTagLeaders = 0x4869 + 65;

}  // namespace

std::unique_ptr<Levels> build_levels(MPI_Comm internal, const config::Config& cfg, int* failed, int* any_flag) {
  if (failed) *failed = 0;
  // Everything here runs on `internal`, libhier's duplicate of the user's communicator (same
  // group, same ranks): discovery, and later the agreements of the executor. The level
  // communicators need no traffic of libhier's: every rank knows every group from the shape,
  // so each is made with PMPI_Comm_create_group, collective over its own members only (no
  // allgather of colours as in a split; the cheapest constructor, which matters to programs
  // that create many communicators).
  auto lv = std::make_unique<Levels>();
  lv->internal = internal;
  PMPI_Comm_rank(internal, &lv->rank);
  PMPI_Comm_size(internal, &lv->size);
  lv->shape = analyze(discover(internal, cfg, wants_physical(cfg)));
  const Shape& s = lv->shape;
  if (!s.hierarchical()) return nullptr;  // the same on every rank: the shape is

  // From here on a rank can fail alone (a communicator it could not create). It still takes
  // part in every creation, so that no peer waits for it, and says so in the agreement below.
  bool ok = true;
  MPI_Group all = MPI_GROUP_NULL;
  ok &= PMPI_Comm_group(internal, &all) == MPI_SUCCESS;
  // Every rank creates its communicators in the same order (steps, node, leaders), so the
  // creations, each collective over its members, can never wait on each other in a cycle.
  auto create = [&](const std::vector<int>& members, int tag) {
    MPI_Comm c = MPI_COMM_NULL;
    if (members.empty()) return c;
    MPI_Group g = MPI_GROUP_NULL;
    int rc = all == MPI_GROUP_NULL ? MPI_ERR_GROUP
                                   : PMPI_Group_incl(all, static_cast<int>(members.size()), members.data(), &g);
    if (rc == MPI_SUCCESS) rc = PMPI_Comm_create_group(internal, g, tag, &c);
    if (g != MPI_GROUP_NULL) PMPI_Group_free(&g);
    if (rc != MPI_SUCCESS || c == MPI_COMM_NULL) {
      ok = false;
      return MPI_COMM_NULL;
    }
    PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    lv->owned_.push_back(c);
    return c;
  };
  const int r = lv->rank;
  if (s.cartesian) {
    const int n = s.nlevels();
    for (int j = 0; j < n; ++j) lv->step.push_back(create(s.members(r, Shape::Comm::Step, j), kTagStep + j));
    lv->cross = lv->step[n - 1];
    lv->node = n == 2 ? lv->step[0] : create(s.members(r, Shape::Comm::Node), kTagNode);
    // Leaders (node position 0) are exactly the cross communicator of position 0.
    lv->leaders = s.local_of[r] == 0 ? lv->cross : MPI_COMM_NULL;
  } else {
    lv->node = create(s.members(r, Shape::Comm::Node), kTagNode);
    lv->leaders = create(s.members(r, Shape::Comm::Leaders), kTagLeaders);
  }
  if (all != MPI_GROUP_NULL) PMPI_Group_free(&all);
  if (util::injected_failure("levels")) ok = false;

  // One agreement per communicator, when its context is built (never on a call's hot path).
  int agreed[2] = {ok ? 0 : 1, any_flag ? *any_flag : 0};
  if (PMPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MAX, internal) != MPI_SUCCESS) agreed[0] = 1;
  const int bad = agreed[0];
  if (any_flag) *any_flag = agreed[1];
  if (bad) {
    if (failed) *failed = ok ? 1 : 2;
    return nullptr;  // frees whatever this rank created
  }
  if (cfg.shm != config::ShmMode::Off) {
    // In creation order (steps, then the node), the levels inside a node only, each once (with
    // two levels the node is step 0): a member that failed to map one must not try it again
    // where the others, which mapped it, do not (open_segment is collective).
    std::vector<MPI_Comm> inside;
    for (int j = 0; j < static_cast<int>(lv->step.size()); ++j)
      if (s.inside_node(Shape::Comm::Step, j)) inside.push_back(lv->step[j]);
    if (std::find(inside.begin(), inside.end(), lv->node) == inside.end()) inside.push_back(lv->node);
    std::erase(inside, MPI_COMM_NULL);
    attach_segments(*lv, inside);
  }
  return lv;
}

}  // namespace hier::topo
