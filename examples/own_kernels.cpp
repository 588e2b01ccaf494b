// Device code of your own in a case, checked like cprr's own ops:
// - a single-source functor (ScaleAdd) that ctx.launch runs per index on cpu and as a grid on
//   cuda, through its device build (CPRR_DEVICE_KERNEL in own_kernels.cu);
// - a kernel written by hand and launched by your code through ctx.native(), which hands you the
//   cudaStream_t and logs the call with the bytes you declare, so the race check sees it. The
//   pipeline below runs two of them on two streams: with the event it is correct; the `_race`
//   twin drops the event, and cprr names the race between the two native kernels.
#include "own_kernels.h"

#include <cprr/case.h>
#include <cprr/kernels.h>

#include <vector>

namespace {

constexpr uint64_t kN = 1 << 16;

// out[i] = in[i]^2, as a native op of `s`: your kernel on cuda, the same loop on the host on cpu.
void square(cprr::Context& ctx, cprr::Stream s, const char* name, cprr::Buffer in,
            cprr::Buffer out) {
  ctx.native(s, name, cprr::Access{{in}, {out}}, [in, out](void* stream) {
    const float* x = in.as<float>();
    float* y = out.as<float>();
    if (stream != nullptr) {
#if CPRR_HAVE_CUDA
      example::square_on_device(x, y, kN, 2'000'000, stream);
#endif
      return;
    }
    for (uint64_t i = 0; i < kN; ++i) y[i] = x[i] * x[i];
  });
}

// x -> squared on the producer stream -> squared again on the consumer stream = x^4.
void pipeline(cprr::Context& ctx, bool ordered) {
  const cprr::Stream producer = ctx.create_stream("producer");
  const cprr::Stream consumer = ctx.stream();
  const cprr::Buffer x = ctx.alloc("x", kN * 4);
  const cprr::Buffer x2 = ctx.alloc("x2", kN * 4);
  const cprr::Buffer x4 = ctx.alloc("x4", kN * 4);
  ctx.launch(producer, "init", kN,
             cprr::kernels::FillIota<float>{x.as<float>(), static_cast<float>(ctx.rank())},
             cprr::Access{{}, {x}});
  square(ctx, producer, "square_x", x, x2);
  if (ordered) ctx.wait(consumer, ctx.record(producer));
  square(ctx, consumer, "square_x2", x2, x4);
  ctx.output("x4", x4, cprr::DType::f32, {}, consumer);
  if (!ordered) return;
  const std::vector<float> got = ctx.read<float>(consumer, x4);
  for (uint64_t i = 0; i < kN; i += 97) {
    const float v = static_cast<float>(ctx.rank()) + static_cast<float>(i);
    CPRR_EXPECT(got[i] == (v * v) * (v * v), "x4[{}] is {}, expected {}", i, got[i],
                (v * v) * (v * v));
  }
}

}  // namespace

CPRR_CASE(own_functor, "example/own_functor",
          {.world_sizes = {2}, .description = "a functor of our own run by ctx.launch"}) {
  const cprr::Buffer x = ctx.alloc("x", kN * 4);
  const cprr::Buffer y = ctx.alloc("y", kN * 4);
  const cprr::Stream s = ctx.stream();
  ctx.launch(s, "init_x", kN, cprr::kernels::FillIota<float>{x.as<float>(), 0.0f},
             cprr::Access{{}, {x}});
  ctx.launch(s, "init_y", kN, cprr::kernels::FillConst<float>{y.as<float>(), 1.0f},
             cprr::Access{{}, {y}});
  ctx.launch(s, "scale_add", kN, example::ScaleAdd{x.as<float>(), y.as<float>(), 2.0f},
             cprr::Access{{x, y}, {y}});
  ctx.output("y", y, cprr::DType::f32, {}, s);
  const std::vector<float> got = ctx.read<float>(s, y);
  for (uint64_t i = 0; i < kN; i += 97) {
    const float expect = 2.0f * static_cast<float>(i) + 1.0f;
    CPRR_EXPECT(got[i] == expect, "y[{}] is {}, expected {}", i, got[i], expect);
  }
}

CPRR_CASE(native_pipeline, "example/native_pipeline",
          {.world_sizes = {2},
           .description = "two kernels of our own on two streams, ordered by an event"}) {
  pipeline(ctx, true);
}

CPRR_CASE(native_pipeline_race, "example/native_pipeline_race",
          {.world_sizes = {2},
           .description = "the pipeline without its event: the consumer's kernel reads x2 "
                          "while the producer's may still write it",
           .seeded_bug = "stream_race"}) {
  pipeline(ctx, false);
}
