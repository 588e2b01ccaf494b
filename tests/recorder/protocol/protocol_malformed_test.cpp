// Malformed input to the control protocol must surface as ProtocolError, never as a crash or as
// any other exception type: every truncation, trailing garbage, unknown variants, huge lengths,
// out-of-range enums and bools, random and mutated bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <variant>

#include "recorder/protocol/protocol.h"
#include "runtime/error.h"
#include "tests/recorder/protocol/protocol_support.h"

namespace cprr {
namespace {

using namespace std::string_literals;
using namespace protocol_test;  // NOLINT(google-build-using-namespace): this folder's own helpers

// ---- malformed payloads ----

TEST(ProtocolMalformed, EveryTruncationOfCaseDoneThrows) {
  const std::string full = encode(FromRank{sample_case_done()});
  ASSERT_GT(full.size(), 500u);
  // Every field is required, so every strict prefix ends inside a read.
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::string_view cut = std::string_view(full).substr(0, n);
    try {
      decode_from_rank(cut);
      ADD_FAILURE() << "a " << n << "-byte prefix of a " << full.size() << "-byte frame decoded";
    } catch (const ProtocolError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "prefix " << n << ": non-ProtocolError: " << e.what();
    }
  }
}

TEST(ProtocolMalformed, EveryTruncationOfRunCaseThrows) {
  RunCase rc{.execution = 1,
             .name = "a/b",
             .params = {{"k", "v"}},
             .seed = 2,
             .placement = Placement::counter};
  const std::string full = encode(ToRank{rc});
  for (std::size_t n = 0; n < full.size(); ++n) {
    protocol_error([&] { decode_to_rank(std::string_view(full).substr(0, n)); });
  }
}

TEST(ProtocolMalformed, TrailingGarbageThrows) {
  const std::string done = encode(FromRank{sample_case_done()});
  const std::string msg = protocol_error([&] { decode_from_rank(done + "\0"s); });
  EXPECT_NE(msg.find("1 trailing bytes"), std::string::npos) << msg;
  protocol_error([&] { decode_from_rank(done + done); });
  protocol_error([&] { decode_to_rank(encode(ToRank{Shutdown{}}) + "xyz"); });
  protocol_error([&] { decode_to_rank(encode(ToRank{StatusQuery{.execution = 3}}) + "\x01"); });
}

TEST(ProtocolMalformed, UnknownVariantIndexThrows) {
  // Layout: one endianness byte, then the variant index as a little-endian int32.
  std::string bytes = encode(ToRank{Shutdown{}});
  ASSERT_EQ(bytes.size(), 5u);
  for (uint32_t index : {3u, 0x7fffffffu, 0xffffffffu}) {
    for (int i = 0; i < 4; ++i) bytes[1 + i] = static_cast<char>((index >> (8 * i)) & 0xff);
    protocol_error([&] { decode_to_rank(bytes); });
    protocol_error([&] { decode_from_rank(bytes); });
  }
}

TEST(ProtocolMalformed, HugeLengthFieldThrowsWithoutAllocating) {
  // CaseDone layout: endianness (1), index (4), execution (8), outcome (1), then the error
  // string's uint64 length. A corrupt length far beyond the frame must fail fast.
  std::string bytes = encode(FromRank{sample_case_done()});
  for (uint64_t len : {uint64_t{1} << 40, uint64_t{1} << 62, uint64_t{bytes.size()}}) {
    put_u64_at(bytes, 14, len);
    const std::string msg = protocol_error([&] { decode_from_rank(bytes); });
    // Refused by the length check, not by a failed allocation or a short read after one.
    EXPECT_NE(msg.find("length field " + std::to_string(len) + " exceeds"), std::string::npos)
        << msg;
  }
  // The same for a container of structs (a RunCase's params map, after a 1-byte name).
  std::string rc = encode(ToRank{RunCase{.execution = 1, .name = "n", .params = {{"a", "b"}}}});
  put_u64_at(rc, 1 + 4 + 8 + 8 + 1, uint64_t{1} << 50);
  const std::string msg = protocol_error([&] { decode_to_rank(rc); });
  EXPECT_NE(msg.find("exceeds"), std::string::npos) << msg;
}

TEST(ProtocolMalformed, OutOfRangeEnumsAndBoolsThrow) {
  // A rank that reports outcome 7 must not be counted as passing.
  CaseDone d;
  std::string done = encode(FromRank{d});
  ASSERT_EQ(done[13], static_cast<char>(RankOutcome::ok));
  done[13] = 7;
  protocol_error([&] { decode_from_rank(done); });

  // RunCase: the placement is the one byte two encodings differing only in it differ in.
  std::string rc = encode(ToRank{RunCase{}});
  const std::string other = encode(ToRank{RunCase{.placement = Placement::never_reuse}});
  ASSERT_EQ(rc.size(), other.size());
  std::size_t at = 0;
  while (at < rc.size() && rc[at] == other[at]) ++at;
  ASSERT_LT(at, rc.size());
  rc[at] = 4;
  protocol_error([&] { decode_to_rank(rc); });
  rc[at] = static_cast<char>(Placement::never_reuse);
  EXPECT_EQ(std::get<RunCase>(decode_to_rank(rc)).placement, Placement::never_reuse);

  // A bool byte other than 0 or 1 (AllocRecord::is_free) is not a bool.
  CaseDone with_alloc;
  with_alloc.capture.allocs.push_back(AllocRecord{.seq = 1, .is_free = true});
  std::string alloc = encode(FromRank{with_alloc});
  // endianness 1, index 4, execution 8, outcome 1, error length 8, reset_ms 8, body_ms 8,
  // probes/outputs/allocs counts 8 each, AllocRecord::seq 8: is_free is byte 70.
  ASSERT_EQ(alloc[70], 1);
  alloc[70] = 2;
  protocol_error([&] { decode_from_rank(alloc); });
}

TEST(ProtocolMalformed, RandomBytesNeverCrash) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 400; ++i) {
    std::string bytes(rng() % 96, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Half the inputs get a valid endianness byte and variant index so decoding goes deeper.
    if (i % 2 == 0 && bytes.size() >= 5) {
      bytes[0] = 1;
      bytes[1] = static_cast<char>(rng() % 3);
      bytes[2] = bytes[3] = bytes[4] = 0;
    }
    decodes_or_protocol_error([&] { decode_to_rank(bytes); }, bytes);
    decodes_or_protocol_error([&] { decode_from_rank(bytes); }, bytes);
    decodes_or_protocol_error([&] { decode_hello(bytes); }, bytes);
    std::string hello;
    put_u32(hello, kProtocolMagic);
    put_u32(hello, kProtocolVersion);
    decodes_or_protocol_error([&] { decode_hello(hello + bytes); }, bytes);
    FrameReader reader;
    reader.append(bytes);
    try {
      while (reader.next()) {
      }
    } catch (const ProtocolError&) {
    }
  }
}

TEST(ProtocolMalformed, MutatedCaseDoneNeverCrashes) {
  const std::string valid = encode(FromRank{sample_case_done()});
  std::mt19937 rng(99);
  for (int i = 0; i < 400; ++i) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Past the index, so the decoder walks into the CaseDone body.
      bytes[5 + rng() % (bytes.size() - 5)] = static_cast<char>(rng());
    }
    decodes_or_protocol_error([&] { decode_from_rank(bytes); }, bytes);
  }
}

}  // namespace
}  // namespace cprr
