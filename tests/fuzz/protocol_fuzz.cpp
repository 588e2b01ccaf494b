// libFuzzer harness for the control protocol (recorder/protocol.cpp). Not wired into CMake.
//
// Feeds arbitrary bytes to FrameReader::append/next, decode_to_rank, decode_from_rank and
// decode_hello. The contract under test: malformed input throws ProtocolError; it never crashes,
// never trips ASan/UBSan, never throws another exception type (an escaping exception aborts and
// is reported as a crash), and never allocates far beyond the input's size. Whatever decodes must
// re-encode to the same bytes (when the input is little-endian, byte 0 == 1) and round trip.
//
// Build and run (from the repository root; ~60 s):
//   mkdir -p /tmp/protofuzz/corpus
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -I. tests/fuzz/protocol_fuzz.cpp recorder/protocol.cpp runtime/error.cpp -lfmt \
//     -o /tmp/protofuzz/protocol_fuzz
//   # seed corpus: valid encodings of every message type
//   clang++ -std=c++20 -g -DCPRR_FUZZ_WRITE_SEEDS -I. tests/fuzz/protocol_fuzz.cpp \
//     recorder/protocol.cpp runtime/error.cpp -lfmt -o /tmp/protofuzz/seeds
//   /tmp/protofuzz/seeds /tmp/protofuzz/corpus
//   /tmp/protofuzz/protocol_fuzz -max_total_time=60 -rss_limit_mb=1024 -malloc_limit_mb=256 \
//     -max_len=4096 /tmp/protofuzz/corpus
//
// -malloc_limit_mb turns any single allocation above 256 MiB (e.g. a corrupt length field
// resized before it is read) into a reported failure rather than a slow run.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "recorder/protocol/protocol.h"
#include "runtime/error.h"

namespace {

using namespace cprr;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "protocol_fuzz: %s\n", what);
  std::abort();
}

template <class Msg, class Decode>
void check_message(std::string_view bytes, Decode decode) {
  Msg msg;
  try {
    msg = decode(bytes);
  } catch (const ProtocolError&) {
    return;
  }
  const std::string again = encode(msg);
  // cereal's stream starts with an endianness byte; a big-endian input legitimately re-encodes
  // to different (little-endian) bytes, so exact equality holds only for byte 0 == 1.
  if (!bytes.empty() && bytes[0] == 1 && again != bytes) fail("re-encoding differs from input");
  if (encode(decode(again)) != again) fail("re-encoded message does not round trip");
}

void check_hello(std::string_view bytes) {
  Hello h;
  try {
    h = decode_hello(bytes);
  } catch (const ProtocolError&) {
    return;
  }
  const std::string again = encode_hello(h);
  if (bytes.size() > 8 && bytes[8] == 1 && again != bytes) fail("hello re-encoding differs");
}

void check_frames(std::string_view bytes) {
  // Whole input at once, and the same bytes split at a data-dependent point: same frames.
  std::string whole, split;
  bool whole_error = false, split_error = false;
  {
    FrameReader r;
    r.append(bytes);
    try {
      while (auto f = r.next()) whole += std::to_string(f->size()) + ":" + *f;
    } catch (const ProtocolError&) {
      whole_error = true;
    }
  }
  {
    FrameReader r;
    const std::size_t cut = bytes.empty() ? 0 : static_cast<unsigned char>(bytes[0]) % bytes.size();
    try {
      r.append(bytes.substr(0, cut));
      while (auto f = r.next()) split += std::to_string(f->size()) + ":" + *f;
      r.append(bytes.substr(cut));
      while (auto f = r.next()) split += std::to_string(f->size()) + ":" + *f;
    } catch (const ProtocolError&) {
      split_error = true;
    }
  }
  if (whole_error != split_error || (!whole_error && whole != split)) {
    fail("frame reassembly depends on how the bytes arrived");
  }
}

}  // namespace

#ifndef CPRR_FUZZ_WRITE_SEEDS

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check_frames(bytes);
  check_message<ToRank>(bytes, [](std::string_view b) { return decode_to_rank(b); });
  check_message<FromRank>(bytes, [](std::string_view b) { return decode_from_rank(b); });
  check_hello(bytes);
  // Past the magic/version gate, so the Hello body itself gets fuzzed.
  std::string hello = encode_hello(Hello{}).substr(0, 8);
  hello.append(bytes);
  check_hello(hello);
  return 0;
}

#else  // seed writer: valid encodings of every message type, one file each

#include <fstream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  int n = 0;
  auto put = [&](const std::string& bytes) {
    std::ofstream(dir + "/seed" + std::to_string(n++), std::ios::binary) << bytes;
  };
  CaseDone done;
  done.execution = 77;
  done.outcome = RankOutcome::fail;
  done.error = "boom";
  done.body_ms = 1.5;
  Capture c;
  c.seq = 1;
  c.name = "out";
  c.dtype = DType::f32;
  c.shape = {2, 3};
  c.bytes = 24;
  c.digest.whole = 5;
  c.digest.chunks = {6, 7};
  c.raw = std::string("\0\1\2", 3);
  done.capture.probes.push_back(c);
  done.capture.outputs.push_back(c);
  done.capture.allocs.push_back(
      AllocRecord{.seq = 1, .is_free = true, .name = "a", .pool = "device"});
  done.capture.ops.push_back(OpRecord{.seq = 2, .kind = "kernel", .reads = {1}, .writes = {2}});
  done.capture.collectives.push_back(CollectiveRecord{.seq = 0, .kind = "all_reduce", .root = 0});
  put(encode(FromRank{done}));
  put(encode(FromRank{WatchdogStatus{.execution = 3, .phase = "body", .running = {"s1"}}}));
  Catalog cat;
  CaseInfo info;
  info.name = "x";
  info.options.grid = {GridAxis{"n", {"1", "2"}}};
  info.options.expect = Expect::hang;
  cat.cases.push_back(info);
  put(encode(FromRank{cat}));
  put(encode(ToRank{RunCase{.execution = 1, .name = "c", .params = {{"k", "v"}}, .seed = 9}}));
  put(encode(ToRank{StatusQuery{.execution = 4}}));
  put(encode(ToRank{Shutdown{}}));
  put(encode_hello(Hello{.rank = 1, .world_size = 2, .pid = 3, .backend = "cpu", .version = "0"}));
  // A byte stream of frames for the FrameReader.
  std::string frames;
  for (const std::string& p : {encode(ToRank{Shutdown{}}), std::string(), std::string("abc")}) {
    const uint32_t len = static_cast<uint32_t>(p.size());
    for (int i = 0; i < 4; ++i) frames.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    frames += p;
  }
  put(frames);
  return 0;
}

#endif
