// The hang report (src/diag/hang_report.cpp) on made-up answers: each state a missing member can
// be in, the waiting list, the mismatch, hostile text from a peer; and the rule that picks the one
// rank that investigates, run as a protocol simulation of 1,000 ranks.
#include "diag/hang_report.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hier/fn.hpp"

using namespace hier::diag;
using nlohmann::json;

namespace {

constexpr uint64_t kKey = 0xabc1, kSeq = 4;

int fn_id(const char* name) {
  for (int f = 0; f < static_cast<int>(hier::Fn::Count); ++f)
    if (std::string(hier::kFnNames[f]) == name) return f;
  return -1;
}

HangCall call_of(int n) {
  HangCall c;
  c.reporter = 0;
  c.limit_s = 2;
  c.waited_s = 2.2;
  c.fn = fn_id("MPI_Allreduce");
  c.seq = kSeq;
  c.key = kKey;
  c.count = 65536;
  c.root = -1;
  for (int i = 0; i < n; ++i) c.world.push_back(i);
  return c;
}

MemberStatus waiting(int r) {
  MemberStatus m;
  m.world = r;
  m.host = "node";
  m.pid = 1000 + r;
  m.known = true;
  m.seq_on_comm = kSeq;
  m.in_call = true;
  m.fn = "MPI_Allreduce";
  m.call_key = kKey;
  m.call_seq = kSeq;
  m.count = 65536;
  m.elapsed_ms = 2200;
  m.site = "hang.c:32 (main)";
  return m;
}

MemberStatus missing(int r) {
  MemberStatus m = waiting(r);
  m.in_call = false;
  m.fn.clear();
  m.call_key = m.call_seq = 0;
  m.seq_on_comm = kSeq - 1;
  m.site = "hang.c:30 (main)";
  m.doing = "not in MPI, main thread sleeping in clock_nanosleep() at hang.c:30 (main)";
  return m;
}

json report_of(const std::vector<MemberStatus>& ms) {
  const HangReport r = build_hang_report(call_of(static_cast<int>(ms.size())), ms);
  json j = json::parse(r.json);  // throws (fails the test) when not valid JSON
  j["_lines"] = r.lines;
  return j;
}

}  // namespace

TEST(HangReport, NotArrived) {
  const json j = report_of({waiting(0), missing(1), waiting(2), waiting(3)});
  EXPECT_EQ(j["format"], "libhier-hang/1");
  EXPECT_EQ(j["collective"], "MPI_Allreduce");
  EXPECT_EQ(j["sequence"], kSeq);
  ASSERT_EQ(j["waiting"].size(), 3u);
  EXPECT_EQ(j["waiting"][1]["rank"], 2);
  EXPECT_EQ(j["waiting"][1]["call_site"], "hang.c:32 (main)");
  ASSERT_EQ(j["missing"].size(), 1u);
  EXPECT_EQ(j["missing"][0]["rank"], 1);
  EXPECT_EQ(j["missing"][0]["state"], "not_arrived");
  EXPECT_EQ(j["missing"][0]["call_site"], "hang.c:30 (main)");
  EXPECT_EQ(j["missing"][0]["collectives_started"], kSeq - 1);
  EXPECT_FALSE(j.contains("mismatch"));
  const std::vector<std::string> lines = j["_lines"];
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("HANG: MPI_Allreduce #4 on a communicator of 4 ranks (world ranks 0-3)", 0), 0u);
  EXPECT_EQ(lines[1], "  waiting (3): rank 0 at hang.c:32 (main); rank 2 at hang.c:32 (main); rank 3 at hang.c:32 (main); ");
  EXPECT_NE(lines[2].find("missing rank 1 (node pid 1001): not in MPI"), std::string::npos);
  EXPECT_NE(lines[2].find("it has started 3 of 4 collectives"), std::string::npos);
  EXPECT_EQ(lines[3], "  class: non-communication hang: never reached the call: rank 1 not in MPI");
  EXPECT_EQ(j["class"], "non_communication_hang");
  EXPECT_FALSE(j.contains("completed_after_s"));
}

TEST(HangReport, InOtherCollective) {
  MemberStatus m = missing(1);
  m.in_call = true;
  m.fn = "MPI_Bcast";
  m.call_key = 0x77;  // another communicator
  m.call_seq = 9;
  m.site = "app.c:5 (f)";
  const json j = report_of({waiting(0), m});
  EXPECT_EQ(j["missing"][0]["state"], "in_other_collective");
  EXPECT_EQ(j["missing"][0]["call"], "MPI_Bcast");
  EXPECT_EQ(j["missing"][0]["call_site"], "app.c:5 (f)");
  EXPECT_EQ(j["class"], "communication_hang");
  EXPECT_EQ(j["class_basis"], "blocked in other communication: rank 1 in a collective on another communicator");
}

// A member not in a collective but in another MPI call (a receive): communication.
TEST(HangReport, InAnotherMpiCallIsCommunication) {
  MemberStatus m = missing(1);
  m.in_mpi = true;
  m.doing = "in MPI_Recv (not a collective), main thread sleeping in poll()";
  const json j = report_of({waiting(0), m});
  EXPECT_EQ(j["missing"][0]["state"], "not_arrived");
  EXPECT_EQ(j["class"], "communication_hang");
  EXPECT_EQ(j["class_basis"], "blocked in other communication: rank 1 in another MPI call");
}

// The report rebuilt when the call completed: the slow class, the class at the report kept, one
// COMPLETED line.
TEST(HangReport, CompletedAfterTheReportIsSlow) {
  const std::vector<MemberStatus> late = {waiting(0), missing(1), waiting(2)};
  HangReport r = build_hang_report(call_of(3), late, 6.25);
  json j = json::parse(r.json);
  EXPECT_EQ(j["class"], "non_communication_slow");
  EXPECT_EQ(j["reported_class"], "non_communication_hang");
  EXPECT_DOUBLE_EQ(j["completed_after_s"].get<double>(), 6.25);
  EXPECT_EQ(r.completed_line,
            "ENDED: MPI_Allreduce #4, reported above as a non-communication hang, is now classed non-communication "
            "slow: the call completed after 6.25 s; late arrival: rank 1 not in MPI when asked");
  r = build_hang_report(call_of(2), {waiting(0), waiting(1)}, 3.5);
  j = json::parse(r.json);
  EXPECT_EQ(j["reported_class"], "communication_hang");
  EXPECT_EQ(j["class"], "communication_slow");
  EXPECT_EQ(j["class_basis"],
            "the call completed after 3.50 s; slow inside the collective: every member reached the call (2 in it)");
  EXPECT_TRUE(build_hang_report(call_of(2), {waiting(0), waiting(1)}).completed_line.empty());
}

TEST(HangReport, AheadInALaterCallOrDone) {
  MemberStatus later = waiting(1);
  later.call_seq = kSeq + 1;  // in the next call on this communicator
  later.seq_on_comm = kSeq + 1;
  later.sig_at_seq = call_signature(fn_id("MPI_Allreduce"), 65536, -1);  // ran the same call: no mismatch
  MemberStatus done = missing(2);
  done.seq_on_comm = kSeq;  // left this call (e.g. a bcast root)
  done.sig_at_seq = later.sig_at_seq;
  const json j = report_of({waiting(0), later, done});
  EXPECT_EQ(j["missing"][0]["state"], "ahead");
  EXPECT_EQ(j["missing"][1]["state"], "ahead");
  EXPECT_FALSE(j.contains("mismatch"));
}

TEST(HangReport, NotRespondingAndGone) {
  MemberStatus stopped, unreachable, gone;
  stopped.world = 1;
  stopped.reach = MemberStatus::NoAnswer;
  unreachable.world = 2;
  unreachable.reach = MemberStatus::Unreachable;
  gone.world = 3;
  gone.reach = MemberStatus::Gone;
  const json j = report_of({waiting(0), stopped, unreachable, gone});
  EXPECT_EQ(j["missing"][0]["state"], "not_responding");
  EXPECT_EQ(j["missing"][1]["state"], "not_responding");
  EXPECT_EQ(j["missing"][2]["state"], "gone");
  EXPECT_EQ(j["class"], "non_communication_hang");
  EXPECT_EQ(j["class_basis"], "never reached the call: rank 1 not responding (stopped?); rank 3 gone");
}

TEST(HangReport, Mismatch) {
  MemberStatus bcast = waiting(1);
  bcast.fn = "MPI_Bcast";
  bcast.root = 1;
  const json j = report_of({waiting(0), bcast, waiting(2)});
  ASSERT_TRUE(j.contains("mismatch"));
  ASSERT_EQ(j["mismatch"].size(), 2u);
  const std::vector<std::string> lines = j["_lines"];
  EXPECT_EQ(j["class"], "communication_hang");
  EXPECT_EQ(lines[lines.size() - 2],
            "  MISMATCH at this sequence number: ranks 0,2 called MPI_Allreduce(count 65536); ranks 1 called "
            "MPI_Bcast(count 65536, root 1);");
}

TEST(HangReport, HostileTextStaysValidJson) {
  MemberStatus m = missing(1);
  m.host = "a\xff\xfe\nb";
  m.doing = std::string("bad \xc3\x28 utf8\tand\x01control") + std::string(5000, 'x');
  const HangReport r = build_hang_report(call_of(2), {waiting(0), m});
  const json j = json::parse(r.json);
  const std::string doing = j["missing"][0]["doing"];
  EXPECT_LE(doing.size(), 600u);  // capped (plus replacement characters)
  EXPECT_EQ(doing.find('\t'), std::string::npos);
  for (const std::string& l : r.lines) EXPECT_EQ(l.find('\n'), std::string::npos);
}

TEST(PickInvestigator, LowestWaitingAsksAndTheOthersDefer) {
  // 0 waits: everyone above defers to it after one question.
  std::vector<bool> w = {true, false, true, true};
  auto ask = [&](const std::vector<int>& idx) {
    std::vector<bool> r;
    for (int i : idx) r.push_back(w[static_cast<size_t>(i)]);
    return r;
  };
  EXPECT_EQ(pick_investigator(0, ask), 0);
  EXPECT_EQ(pick_investigator(2, ask), 0);
  EXPECT_EQ(pick_investigator(3, ask), 0);
  w = {false, false, true, true};
  EXPECT_EQ(pick_investigator(2, ask), 2);
  EXPECT_EQ(pick_investigator(3, ask), 2);
}

// 1,000 ranks: the members at `missing_at` have not arrived (or are gone), all others wait. Every
// waiting rank runs the rule against the others' states; exactly one investigates, the lowest
// waiting one, its report names every member once and in the right list, and no rank is asked
// more than once by each other rank.
TEST(PickInvestigator, SimulatedThousandRanks) {
  constexpr int n = 1000;
  for (const std::vector<int>& missing_at : std::vector<std::vector<int>>{{1}, {0}, {0, 1, 2, 3, 500}, {999}}) {
    std::vector<MemberStatus> state(n);
    for (int r = 0; r < n; ++r) state[static_cast<size_t>(r)] = waiting(r);
    for (int r : missing_at) state[static_cast<size_t>(r)] = r == 0 ? MemberStatus{} : missing(r);
    if (missing_at[0] == 0) {
      state[0].world = 0;
      state[0].reach = MemberStatus::Gone;
    }
    std::vector<int> asked(n, 0);
    std::vector<int> investigators;
    for (int me = 0; me < n; ++me) {
      if (!waiting_in(state[static_cast<size_t>(me)], kKey, kSeq)) continue;
      const int who = pick_investigator(me, [&](const std::vector<int>& idx) {
        std::vector<bool> r;
        for (int i : idx) {
          ++asked[static_cast<size_t>(i)];
          r.push_back(waiting_in(state[static_cast<size_t>(i)], kKey, kSeq));
        }
        return r;
      });
      if (who == me) investigators.push_back(me);
      else EXPECT_TRUE(waiting_in(state[static_cast<size_t>(who)], kKey, kSeq));
    }
    int lowest = 0;
    while (!waiting_in(state[static_cast<size_t>(lowest)], kKey, kSeq)) ++lowest;
    ASSERT_EQ(investigators, std::vector<int>{lowest});
    for (int r = 0; r < n; ++r) EXPECT_LE(asked[static_cast<size_t>(r)], n - 1) << "rank " << r;
    // The investigator asks everyone (one question each) and reports.
    const json j = report_of(state);
    EXPECT_EQ(j["waiting"].size() + j["missing"].size(), static_cast<size_t>(n));
    ASSERT_EQ(j["missing"].size(), missing_at.size());
    for (size_t k = 0; k < missing_at.size(); ++k) {
      EXPECT_EQ(j["missing"][k]["rank"], missing_at[k]);
      EXPECT_EQ(j["missing"][k]["state"], missing_at[k] == 0 ? "gone" : "not_arrived");
    }
    EXPECT_FALSE(j.contains("mismatch"));
  }
}

// ---- the flight recorder's calls (flight_compare.hpp) ----------------------------------------
namespace {

RecentCall rc(uint64_t seq, const char* site, long long count = 1, const char* call = "MPI_Allreduce", char st = 'C') {
  RecentCall c;
  c.call = call;
  c.comm = kKey;
  c.seq = seq;
  c.count = count;
  c.state = st;
  c.site = site;
  c.bytes = 8;
  return c;
}

// Calls #1..#n at a.c:1, a.c:2, ... (the last one entered, the rank waits in it).
std::vector<RecentCall> run(uint64_t n, bool last_entered = true) {
  static std::vector<std::string> sites;
  for (uint64_t i = sites.size(); i <= n + 2; ++i) sites.push_back("a.c:" + std::to_string(i));
  std::vector<RecentCall> v;
  for (uint64_t s = 1; s <= n; ++s) v.push_back(rc(s, sites[s].c_str(), 1, "MPI_Allreduce", s == n && last_entered ? 'E' : 'C'));
  return v;
}

}  // namespace

TEST(Flight, EncodeDecodeRoundTrip) {
  std::vector<RecentCall> v = run(5);
  v.push_back(rc(2, "b.c:7 (f, g)", -1, "MPI_Bcast"));
  v.back().comm = 0x77;
  v.back().root = 3;
  const std::string wire = encode_recent(v, kKey, 16384);
  EXPECT_EQ(wire.find('\n'), std::string::npos);
  const size_t tab = wire.find('\t');
  ASSERT_NE(tab, std::string::npos);
  EXPECT_EQ(wire.find('\t', tab + 1), std::string::npos);  // exactly two fields
  std::vector<RecentCall> back;
  ASSERT_TRUE(decode_recent(wire.substr(0, tab), wire.substr(tab + 1), back));
  ASSERT_EQ(back.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(back[i].call, v[i].call);
    EXPECT_EQ(back[i].comm, v[i].comm);
    EXPECT_EQ(back[i].seq, v[i].seq);
    EXPECT_EQ(back[i].count, v[i].count);
    EXPECT_EQ(back[i].root, v[i].root);
    EXPECT_EQ(back[i].state, v[i].state);
    EXPECT_EQ(back[i].site, v[i].site);
  }
  std::vector<RecentCall> bad;
  EXPECT_FALSE(decode_recent("", "MPI_Allreduce,1,2", bad));
  EXPECT_FALSE(decode_recent("", "rm -rf,1,2,3,4,5,C,0", bad));
}

// Within the answer's room, the calls on the asked communicator stay and the oldest go first.
TEST(Flight, EncodeKeepsTheAskedCommunicatorsNewestCalls) {
  std::vector<RecentCall> v;
  for (uint64_t s = 1; s <= 200; ++s) {
    v.push_back(rc(s, "a.c:1"));
    RecentCall o = rc(s, "a.c:2");
    o.comm = 0x99;
    v.push_back(o);
  }
  const std::string wire = encode_recent(v, kKey, 2000);
  EXPECT_LE(wire.size(), 2000u);
  std::vector<RecentCall> back;
  ASSERT_TRUE(decode_recent(wire.substr(0, wire.find('\t')), wire.substr(wire.find('\t') + 1), back));
  ASSERT_FALSE(back.empty());
  for (const RecentCall& c : back) EXPECT_EQ(c.comm, kKey);
  EXPECT_EQ(back.back().seq, 200u);
}

// Rank 1 skipped the call at a.c:5 (#5 of the others): its #5 is their #6.
TEST(Flight, NamesTheRankThatSkippedACall) {
  std::vector<MemberStatus> ms;
  for (int r = 0; r < 4; ++r) {
    MemberStatus m = r == 1 ? missing(r) : waiting(r);
    m.recent = run(6);
    if (r == 1) {
      m.recent = run(4, false);
      m.recent.push_back(rc(5, "a.c:6"));
      m.seq_on_comm = 5;
    }
    ms.push_back(m);
  }
  const Divergence d = find_divergence(ms, kKey, 6);
  EXPECT_EQ(d.kind, Divergence::DifferentSites);
  EXPECT_EQ(d.seq, 5u);
  ASSERT_EQ(d.groups.size(), 2u);
  EXPECT_EQ(d.groups[0].ranks, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(d.groups[0].site, "a.c:5");
  EXPECT_EQ(d.groups[1].ranks, (std::vector<int>{1}));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].rank, 1);
  EXPECT_EQ(d.notes[0].what, "skipped MPI_Allreduce(count 1) at a.c:5 (#5)");
  // In the report: the recent calls of every member, the divergence and its lines.
  HangCall c = call_of(4);
  c.seq = 6;
  c.count = 1;
  const HangReport r = build_hang_report(c, ms);
  const json j = json::parse(r.json);
  ASSERT_EQ(j["recent_calls"].size(), 4u);
  EXPECT_EQ(j["recent_calls"][1]["rank"], 1);
  EXPECT_EQ(j["recent_calls"][1]["calls"].size(), 5u);
  EXPECT_EQ(j["recent_calls"][0]["calls"][5]["state"], "entered");
  EXPECT_EQ(j["divergence"]["kind"], "different_call_sites");
  EXPECT_EQ(j["divergence"]["sequence"], 5);
  EXPECT_EQ(j["divergence"]["ranks"][0]["rank"], 1);
  bool named = false;
  for (const std::string& l : r.lines) named = named || l == "  flight recorder: rank 1 skipped MPI_Allreduce(count 1) at a.c:5 (#5)";
  EXPECT_TRUE(named);
  EXPECT_EQ(r.lines.back().rfind("  class: ", 0), 0u);  // the class stays the last line
}

// Different collectives at one sequence number: the first one named, with who called what.
TEST(Flight, NamesTheFirstDifferentCall) {
  std::vector<MemberStatus> ms = {waiting(0), waiting(1), waiting(2)};
  for (MemberStatus& m : ms) m.recent = run(4);
  ms[2].recent[2] = rc(3, "a.c:3", 4, "MPI_Bcast");
  const Divergence d = find_divergence(ms, kKey, 4);
  EXPECT_EQ(d.kind, Divergence::DifferentCalls);
  EXPECT_EQ(d.seq, 3u);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].rank, 2);
  EXPECT_EQ(d.notes[0].what,
            "called MPI_Bcast(count 4) at a.c:3 instead of MPI_Allreduce(count 1) at a.c:3 (#3)");
}

// The same calls as far as each went: the first call a rank never entered.
TEST(Flight, NamesTheFirstCallARankNeverEntered) {
  std::vector<MemberStatus> ms = {waiting(0), missing(1)};
  ms[0].recent = run(4);
  ms[1].recent = run(3, false);
  const Divergence d = find_divergence(ms, kKey, 4);
  EXPECT_EQ(d.kind, Divergence::NeverEntered);
  EXPECT_EQ(d.seq, 4u);
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].call, "MPI_Allreduce(count 1)");
  EXPECT_EQ(d.groups[0].site, "a.c:4");
  EXPECT_EQ(d.groups[0].ranks, (std::vector<int>{0}));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].what, "never entered MPI_Allreduce(count 1) at a.c:4 (#4)");
}

// Nothing to compare (no recorder, one member answering): no divergence, no section.
TEST(Flight, NoCallsNoDivergence) {
  std::vector<MemberStatus> ms = {waiting(0), missing(1)};
  EXPECT_EQ(find_divergence(ms, kKey, 4).kind, Divergence::None);
  const json j = report_of(ms);
  EXPECT_FALSE(j.contains("recent_calls"));
  EXPECT_FALSE(j.contains("divergence"));
}
