// C4's four classes (src/diag/c4_class.cpp) decided on made-up evidence: every whereabouts of a
// member alone and in the mixes that decide between the rules, with and without completion.
#include "diag/c4_class.hpp"

#include <gtest/gtest.h>

using namespace hier::diag;
using W = Whereabouts;

namespace {

C4Evidence evidence(std::vector<std::pair<int, W>> members, bool mismatch = false, double completed = -1) {
  C4Evidence e;
  e.members = std::move(members);
  e.mismatch = mismatch;
  e.completed_after_s = completed;
  return e;
}

}  // namespace

TEST(C4Class, NamesAreTheOneVocabulary) {
  EXPECT_STREQ(c4_key(C4Class::CommunicationHang), "communication_hang");
  EXPECT_STREQ(c4_key(C4Class::NonCommunicationHang), "non_communication_hang");
  EXPECT_STREQ(c4_key(C4Class::CommunicationSlow), "communication_slow");
  EXPECT_STREQ(c4_key(C4Class::NonCommunicationSlow), "non_communication_slow");
  EXPECT_STREQ(c4_text(C4Class::NonCommunicationSlow), "non-communication slow");
}

// Each whereabouts of one missing member, the others in the call.
TEST(C4Class, EachWhereaboutsAlone) {
  struct Case {
    W w;
    C4Class hang, slow;
  };
  const Case cases[] = {
      {W::OutsideMpi, C4Class::NonCommunicationHang, C4Class::NonCommunicationSlow},
      {W::Stopped, C4Class::NonCommunicationHang, C4Class::NonCommunicationSlow},
      {W::Gone, C4Class::NonCommunicationHang, C4Class::NonCommunicationHang},  // returned: an error
      {W::InOtherCollective, C4Class::CommunicationHang, C4Class::CommunicationSlow},
      {W::InOtherMpiCall, C4Class::CommunicationHang, C4Class::CommunicationSlow},
      {W::Unreachable, C4Class::CommunicationHang, C4Class::CommunicationSlow},
      {W::Ahead, C4Class::CommunicationHang, C4Class::CommunicationSlow},
      {W::InCall, C4Class::CommunicationHang, C4Class::CommunicationSlow},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(classify_hang(evidence({{0, W::InCall}, {1, c.w}, {2, W::InCall}})).cls, c.hang) << static_cast<int>(c.w);
    EXPECT_EQ(classify_hang(evidence({{0, W::InCall}, {1, c.w}}, false, 4.0)).cls, c.slow) << static_cast<int>(c.w);
  }
}

TEST(C4Class, EveryMemberInTheCall) {
  const C4Verdict v = classify_hang(evidence({{0, W::InCall}, {1, W::InCall}, {2, W::Ahead}}));
  EXPECT_EQ(v.cls, C4Class::CommunicationHang);
  EXPECT_EQ(v.basis, "every member reached the call (2 in it, 1 past it) and it does not complete");
  const C4Verdict s = classify_hang(evidence({{0, W::InCall}, {1, W::InCall}}, false, 2.5));
  EXPECT_EQ(s.cls, C4Class::CommunicationSlow);
  EXPECT_EQ(s.basis, "the call completed after 2.50 s; slow inside the collective: every member reached the call (2 in it)");
}

// A mismatch is a communication hang even when a member is also outside MPI.
TEST(C4Class, MismatchFirst) {
  const C4Verdict v = classify_hang(evidence({{0, W::InCall}, {1, W::InCall}, {2, W::OutsideMpi}}, true));
  EXPECT_EQ(v.cls, C4Class::CommunicationHang);
  EXPECT_EQ(v.basis, "the members called different collectives at this sequence number");
}

// A member outside communication outweighs members blocked in other communication (they may be
// waiting for it), and the basis names only the ones outside, grouped.
TEST(C4Class, OutsideOutweighsOtherCommunication) {
  const C4Verdict v = classify_hang(evidence(
      {{0, W::InCall}, {1, W::InOtherMpiCall}, {2, W::OutsideMpi}, {3, W::OutsideMpi}, {4, W::Gone}, {5, W::Stopped}}));
  EXPECT_EQ(v.cls, C4Class::NonCommunicationHang);
  EXPECT_EQ(v.basis, "never reached the call: ranks 2-3 not in MPI; rank 5 not responding (stopped?); rank 4 gone");
  const C4Verdict s = classify_hang(evidence({{0, W::InCall}, {1, W::OutsideMpi}}, false, 6.0));
  EXPECT_EQ(s.cls, C4Class::NonCommunicationSlow);
  EXPECT_EQ(s.basis, "the call completed after 6.00 s; late arrival: rank 1 not in MPI when asked");
}

TEST(C4Class, OtherCommunicationNamed) {
  const C4Verdict v =
      classify_hang(evidence({{0, W::InCall}, {1, W::InOtherCollective}, {2, W::Unreachable}, {3, W::Ahead}}));
  EXPECT_EQ(v.cls, C4Class::CommunicationHang);
  EXPECT_EQ(v.basis,
            "blocked in other communication: rank 1 in a collective on another communicator; rank 2 unreachable (node "
            "or link down?)");
  const C4Verdict s = classify_hang(evidence({{0, W::InCall}, {1, W::InOtherMpiCall}}, false, 2.0));
  EXPECT_EQ(s.cls, C4Class::CommunicationSlow);
  EXPECT_EQ(s.basis, "the call completed after 2.00 s; slow in other communication: rank 1 in another MPI call");
}

// A call that returns without a member that died, or across different collectives, returned an
// error: it stays the hang it was, and the basis says why.
TEST(C4Class, ReturnWithAGoneMemberOrAMismatchIsNoSlowCall) {
  const C4Verdict g = classify_hang(evidence({{0, W::InCall}, {1, W::Gone}}, false, 3.0));
  EXPECT_EQ(g.cls, C4Class::NonCommunicationHang);
  EXPECT_EQ(g.basis, "never reached the call: rank 1 gone; the call returned after 3.00 s, which only an error return explains");
  EXPECT_EQ(classify_hang(evidence({{0, W::InCall}, {1, W::InCall}}, true, 3.0)).cls, C4Class::CommunicationHang);
}
