// decide_verdict on hand-built replay facts: every branch of the cascade, and its order.
#include "analysis/verdict.h"

#include <gtest/gtest.h>

#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

using test::execution;
using test::through;

const ExecutionResult kFreshA = execution(1, Mode::fresh, ExecStatus::pass, {"a"});
const ExecutionResult kPoolA = execution(2, Mode::pool, ExecStatus::pass, {"a"});
const ExecutionResult kFreshB = execution(3, Mode::fresh, ExecStatus::pass, {"b"});
const ExecutionResult kPoolB = execution(4, Mode::pool, ExecStatus::pass, {"b"});

TEST(Verdict, NamesRoundTrip) {
  for (Verdict v :
       {Verdict::reproduced, Verdict::state_leak, Verdict::stream_race, Verdict::allocator_order,
        Verdict::uninitialized_read, Verdict::collective_mismatch, Verdict::nondeterministic,
        Verdict::hang, Verdict::crash}) {
    EXPECT_EQ(parse_verdict(verdict_name(v)), v);
  }
  EXPECT_EQ(verdict_name(Verdict::state_leak), "state_leak");
  EXPECT_FALSE(parse_verdict("leak").has_value());
}

TEST(Verdict, EverythingMatchingIsReproduced) {
  const VerdictDecision d = decide_verdict({&kFreshA, &kPoolA, &kFreshA, &kPoolA});
  EXPECT_EQ(d.verdict, Verdict::reproduced);
  EXPECT_FALSE(d.where.has_value());
  EXPECT_EQ(d.why, "every rank's probes and outputs match the record");
}

TEST(Verdict, CrashOrHangInAReplayComesFirst) {
  ExecutionResult hang = execution(5, Mode::pool, ExecStatus::hang, {});
  hang.summary = "rank 1 never joined";
  const VerdictDecision d = decide_verdict({&kFreshA, &kPoolA, &kFreshB, &hang});
  EXPECT_EQ(d.verdict, Verdict::hang) << "before the fresh replay's nondeterminism";
  EXPECT_NE(d.why.find("rank 1 never joined"), std::string::npos);
}

TEST(Verdict, ACollectiveMismatchNamesTheCauseOfAReplaysCrash) {
  ExecutionResult crash = execution(5, Mode::fresh, ExecStatus::crash, {});
  crash.summary = "rank 1 killed by signal 6 (SIGABRT)";
  const Finding<CollectiveMismatch> m{5, Mode::fresh, {0, 0, 1, "bytes", "64", "32", "all_reduce"}};
  ReplayFacts f{&kFreshA, nullptr, &crash, nullptr};
  f.collective = &m;
  const VerdictDecision d = decide_verdict(f);
  EXPECT_EQ(d.verdict, Verdict::collective_mismatch) << "before the crash it caused";
  EXPECT_NE(d.why.find("rank 0 has bytes 64, rank 1 has bytes 32"), std::string::npos) << d.why;
  EXPECT_NE(d.why.find("the fresh replay ended as crash"), std::string::npos) << d.why;
  f.collective = nullptr;
  EXPECT_EQ(decide_verdict(f).verdict, Verdict::crash);
}

TEST(Verdict, FreshReplayDifferingFromFreshRecordIsNondeterministic) {
  const VerdictDecision d = decide_verdict({&kFreshA, &kPoolA, &kFreshB, &kPoolB});
  EXPECT_EQ(d.verdict, Verdict::nondeterministic);
  ASSERT_TRUE(d.where.has_value());
  EXPECT_FALSE(d.localize_polluters);
}

TEST(Verdict, PooledReplayDifferingFromFreshReplayIsAStateLeakToLocalize) {
  const VerdictDecision d = decide_verdict({&kFreshA, &kPoolB, &kFreshA, &kPoolB});
  EXPECT_EQ(d.verdict, Verdict::state_leak);
  EXPECT_TRUE(d.localize_polluters);
  ASSERT_TRUE(d.where.has_value());
  EXPECT_EQ(d.where->kind, "output");
}

TEST(Verdict, PooledReplayDifferingFromItsRecordIsNondeterministic) {
  const VerdictDecision d = decide_verdict({nullptr, &kPoolA, nullptr, &kPoolB});
  EXPECT_EQ(d.verdict, Verdict::nondeterministic);
}

TEST(Verdict, FreshReplayAgainstOnlyAPooledRecordIsAStateLeak) {
  const VerdictDecision d = decide_verdict({nullptr, &kPoolB, &kFreshA, nullptr});
  EXPECT_EQ(d.verdict, Verdict::state_leak);
  EXPECT_FALSE(d.localize_polluters) << "no pooled replay: no predecessors to bisect";
}

TEST(Verdict, AReplayWithoutResultsNeverClaimsMatchingOutputs) {
  ExecutionResult silent = execution(6, Mode::fresh, ExecStatus::pass, {"a"});
  silent.ranks[0].done.reset();
  ExecutionResult recorded = silent;
  const VerdictDecision d = decide_verdict({&recorded, nullptr, &silent, nullptr});
  EXPECT_EQ(d.verdict, Verdict::reproduced);
  EXPECT_EQ(d.why.find("match the record"), std::string::npos) << d.why;
}

/// Both modes recorded through nccl with outputs "a", replayed through gloo_staged.
struct RecordedThroughNccl {
  ExecutionResult rec_fresh = through(kFreshA, kCollectivesNccl);
  ExecutionResult rec_pool = through(kPoolA, kCollectivesNccl);
  ExecutionResult rep_fresh, rep_pool;

  RecordedThroughNccl(const ExecutionResult& fresh, const ExecutionResult& pool)
      : rep_fresh(through(fresh, kCollectivesGlooStaged)),
        rep_pool(through(pool, kCollectivesGlooStaged)) {}
  VerdictDecision decide() const {
    return decide_verdict({&rec_fresh, &rec_pool, &rep_fresh, &rep_pool});
  }
};

// Two transports may sum in different orders: a replay through gloo_staged differing from a
// record through nccl is no evidence of a bug, and the why says which transports were involved.
TEST(Verdict, OutputsDifferingAcrossTransportsAreNotJudged) {
  const RecordedThroughNccl r(kFreshB, kPoolB);
  const VerdictDecision d = r.decide();
  EXPECT_EQ(d.verdict, Verdict::reproduced);
  EXPECT_FALSE(d.where.has_value());
  EXPECT_NE(d.why.find("the fresh replay's collectives went through gloo_staged, the fresh "
                       "record's through nccl: outputs may differ by reduction order"),
            std::string::npos)
      << d.why;
  EXPECT_NE(d.why.find("the pooled replay's collectives went through gloo_staged, the pooled "
                       "record's through nccl"),
            std::string::npos)
      << d.why;
  // Only a pooled record, only a fresh replay: no state_leak across transports either.
  EXPECT_EQ(decide_verdict({nullptr, &r.rec_pool, &r.rep_fresh, nullptr}).verdict,
            Verdict::reproduced);
}

TEST(Verdict, OutputsMatchingAcrossTransportsMatchTheRecord) {
  const ExecutionResult rec = through(kFreshA, kCollectivesNccl);
  const ExecutionResult rep = through(kFreshA, kCollectivesGlooStaged);
  const VerdictDecision d = decide_verdict({&rec, nullptr, &rep, nullptr});
  EXPECT_EQ(d.verdict, Verdict::reproduced);
  EXPECT_EQ(d.why, "every rank's probes and outputs match the record");
}

TEST(Verdict, OutputsDifferingWithinOneTransportAreStillNondeterministic) {
  const ExecutionResult rec = through(kFreshA, kCollectivesGlooStaged);
  const ExecutionResult rep = through(kFreshB, kCollectivesGlooStaged);
  const VerdictDecision d = decide_verdict({&rec, nullptr, &rep, nullptr});
  EXPECT_EQ(d.verdict, Verdict::nondeterministic);
  ASSERT_TRUE(d.where.has_value());
  EXPECT_EQ(d.why.find("across transports"), std::string::npos) << d.why;
}

// Reduction order changes bytes, never a status: a record that failed through nccl and a replay
// that passes through gloo_staged still differ, and that is judged.
TEST(Verdict, AStatusDifferingAcrossTransportsIsStillJudged) {
  const ExecutionResult rec =
      through(execution(7, Mode::fresh, ExecStatus::fail, {"a"}), kCollectivesNccl);
  const ExecutionResult rep = through(kFreshA, kCollectivesGlooStaged);
  const VerdictDecision d = decide_verdict({&rec, nullptr, &rep, nullptr});
  EXPECT_EQ(d.verdict, Verdict::nondeterministic) << d.why;
  ASSERT_TRUE(d.where.has_value());
  EXPECT_EQ(d.where->reason, "status");
}

// The fresh and pooled replays ran on one machine through one transport: their difference is
// still a state leak, whatever transport the record took.
TEST(Verdict, PooledReplayDifferingFromFreshReplayOfItsTransportIsStillAStateLeak) {
  const VerdictDecision d = RecordedThroughNccl(kFreshB, kPoolA).decide();
  EXPECT_EQ(d.verdict, Verdict::state_leak) << d.why;
  EXPECT_TRUE(d.localize_polluters);
}

// A case with a read of never-written bytes and a race: the read outranks the race until the
// replays say otherwise; when the poison did not show the read and the race was confirmed, the
// race is the verdict. Anything short of that leaves the decided verdict alone.
TEST(Verdict, AConfirmedRaceOutranksAnUninitializedReadThePoisonDidNotShow) {
  const auto [v, why] = confirmed_verdict(Verdict::uninitialized_read, {true, false, true});
  EXPECT_EQ(v, Verdict::stream_race);
  EXPECT_NE(why.find("did not show the uninitialized read"), std::string::npos) << why;
  for (const Confirmations& seen : {Confirmations{true, true, true},     // the poison showed it
                                    Confirmations{false, false, true},   // no poison ran
                                    Confirmations{true, false, false}})  // no race confirmed
  {
    const auto [kept, none] = confirmed_verdict(Verdict::uninitialized_read, seen);
    EXPECT_EQ(kept, Verdict::uninitialized_read);
    EXPECT_TRUE(none.empty());
  }
  EXPECT_EQ(confirmed_verdict(Verdict::allocator_order, {true, false, true}).first,
            Verdict::allocator_order);
}

RaceFinding race_finding(bool candidate) {
  RaceFinding f;
  f.race.first = RaceOp{0, 1, 4, "native", "lib_fill", candidate};
  f.race.second = RaceOp{0, 0, 5, "kernel", "consume"};
  f.race.overlaps = {RaceOverlap{0, 0, 0, 64, 3, "out", 3, "out"}};
  f.race.candidate = candidate;
  return f;
}

// A race candidate (an access of unknown direction) is no verdict by itself: the replays that
// confirm it make it stream_race where a race of known directions would have been the verdict.
TEST(Verdict, ARaceCandidateIsStreamRaceOnlyOnceItsReplaysConfirmIt) {
  const RaceFinding exact = race_finding(false), candidate = race_finding(true);
  ReplayFacts facts{&kFreshA, &kPoolA, &kFreshA, &kPoolA};
  facts.race = &exact;
  EXPECT_EQ(decide_verdict(facts).verdict, Verdict::stream_race);
  facts.race = &candidate;
  const VerdictDecision d = decide_verdict(facts);
  EXPECT_EQ(d.verdict, Verdict::reproduced) << d.why;

  const Confirmations confirmed{false, false, true, true}, dropped{false, false, false, true};
  for (Verdict from : {Verdict::reproduced, Verdict::nondeterministic, Verdict::state_leak}) {
    const auto [v, why] = confirmed_verdict(from, confirmed);
    EXPECT_EQ(v, Verdict::stream_race) << verdict_name(from);
    EXPECT_NE(why.find("confirmed the race candidate"), std::string::npos) << why;
    EXPECT_EQ(confirmed_verdict(from, dropped).first, from);
  }
  for (Verdict stronger :
       {Verdict::crash, Verdict::hang, Verdict::collective_mismatch, Verdict::allocator_order}) {
    EXPECT_EQ(confirmed_verdict(stronger, confirmed).first, stronger) << verdict_name(stronger);
  }
  // A race of known directions was the verdict already: nothing to promote.
  EXPECT_EQ(confirmed_verdict(Verdict::reproduced, {false, false, true, false}).first,
            Verdict::reproduced);
}

}  // namespace
}  // namespace cprr
