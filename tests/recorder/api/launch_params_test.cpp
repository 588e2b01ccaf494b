// pointed_touches and LiveMemory on hand-built parameter buffers: which words are taken as
// pointers, which memory they name (regions that come and go, gaps), and the spans that follow.
#include "recorder/api/launch_params.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

/// A parameter buffer built word by word, as a launch's kernelParams are laid out.
struct ParamWords {
  std::vector<std::byte> bytes;
  std::vector<KernelParam> layout;

  ParamWords& add(const void* value, uint64_t size, uint64_t align) {
    const uint64_t at = (bytes.size() + align - 1) / align * align;
    bytes.resize(at + size);
    std::memcpy(bytes.data() + at, value, size);
    layout.push_back(KernelParam{at, size});
    return *this;
  }
  ParamWords& pointer(uint64_t address) { return add(&address, 8, 8); }
  ParamWords& i32(int32_t v) { return add(&v, 4, 4); }
};

LiveMemory known(const std::vector<KnownMemory>& regions) {
  LiveMemory m;
  for (const KnownMemory& r : regions) m.add(r);
  return m;
}

const LiveMemory kMemory = known({{0x1000, 0x1000, 1}, {0x2400, 0x100, 2}, {0x4000, 0x10, 4}});

TEST(LiveMemory, RegionsComeAndGoAndOneAtALiveAddressReplacesIt) {
  LiveMemory live;
  live.add({0x1000, 0x100, 1});
  live.add({0x2000, 0x10, 2});
  live.add({0x3000, 0, 9});  // empty: holds nothing
  EXPECT_EQ(live.find(0x1000)->buffer, 1u);
  EXPECT_EQ(live.find(0x10ff)->buffer, 1u);
  EXPECT_EQ(live.find(0x1100), nullptr);
  EXPECT_EQ(live.find(0xfff), nullptr);
  EXPECT_EQ(live.find(0x3000), nullptr);
  live.add({0x1000, 0x40, 3});  // the address taken again: buffer 1 was freed unseen
  EXPECT_EQ(live.find(0x1000)->buffer, 3u);
  EXPECT_EQ(live.find(0x1080), nullptr);
  live.remove(1);  // already replaced: nothing to remove
  EXPECT_EQ(live.find(0x1000)->buffer, 3u);
  live.remove(3);
  EXPECT_EQ(live.find(0x1000), nullptr);
  EXPECT_EQ(live.find(0x2008)->buffer, 2u);
  ParamWords p;
  p.pointer(0x2008);
  EXPECT_EQ(pointed_touches(p.layout, p.bytes, live),
            (std::vector<PointedTouch>{{2, ByteSpan{8, 8}}}));
}

TEST(PointedTouches, APointerAtAStartIsAllOfItAndIntoItFromThereToItsEnd) {
  ParamWords p;
  p.pointer(0x4000).i32(7).pointer(0x2480).pointer(0x9999);
  const auto t = pointed_touches(p.layout, p.bytes, kMemory);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0], (PointedTouch{4, ByteSpan{0, 0x10}}));
  EXPECT_EQ(t[1], (PointedTouch{2, ByteSpan{0x80, 0x80}}));
}

TEST(PointedTouches, PointersIntoOneBufferAreOneSpanFromTheLowestToItsEnd) {
  ParamWords p;
  p.pointer(0x1c00).pointer(0x1800).pointer(0x1900);
  const auto t = pointed_touches(p.layout, p.bytes, kMemory);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0], (PointedTouch{1, ByteSpan{0x800, 0x800}}));
}

TEST(PointedTouches, WordsOfAStructAreLookedUpAndSmallParametersAreNot) {
  struct Args {
    int64_t n;
    uint64_t src;
    uint64_t dst;
  } args{0x4000, 0x1000, 0x4008};
  ParamWords p;
  p.i32(0x4000).add(&args, sizeof args, 8);
  const auto t = pointed_touches(p.layout, p.bytes, kMemory);
  ASSERT_EQ(t.size(), 2u) << "n equals an address too: taken as a pointer, a candidate at worst";
  EXPECT_EQ(t[0], (PointedTouch{4, ByteSpan{0, 0x10}}));
  EXPECT_EQ(t[1], (PointedTouch{1, ByteSpan{0, 0x1000}}));
}

// A copy names its extent: exact spans of every region it crosses, none for the gaps.
TEST(RangeTouches, ACopysBytesAreSpansOfTheRegionsTheyFallInAndNoneOfTheGaps) {
  // [0x1800, 0x2480): the tail of 1, the gap before 2, the head of 2.
  EXPECT_EQ(range_touches(0x1800, 0xc80, kMemory),
            (std::vector<PointedTouch>{{1, ByteSpan{0x800, 0x800}}, {2, ByteSpan{0, 0x80}}}));
  EXPECT_EQ(range_touches(0x1010, 0x20, kMemory),
            (std::vector<PointedTouch>{{1, ByteSpan{0x10, 0x20}}}));
  EXPECT_TRUE(range_touches(0x2100, 0x100, kMemory).empty()) << "in the gap";
  EXPECT_TRUE(range_touches(0x1000, 0, kMemory).empty()) << "no bytes";
  EXPECT_EQ(range_touches(0x3000, UINT64_MAX, kMemory),
            (std::vector<PointedTouch>{{4, ByteSpan{0, 0x10}}}))
      << "an extent past the address space ends there";
}

TEST(PointedTouches, AParameterPastTheBufferIsRefusedNamingIt) {
  ParamWords p;
  p.pointer(0x1000);
  p.layout.push_back(KernelParam{8, 8});
  try {
    pointed_touches(p.layout, p.bytes, kMemory);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel parameter 1 at offset 8 (8 bytes) reaches past "
                                         "the 8-byte parameter buffer"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cprr
