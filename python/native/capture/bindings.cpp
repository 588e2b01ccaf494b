// The `_cprr_torch` extension module: the op capture in C++ (op_capture.h) for cprr's Python
// side (python/cprr/capture/native_capture.py). Built against the installed torch's headers and
// libraries (Debian's libtorch-dev in CI; the GPU machine's torch by tools/device/build_python.sh)
// and logging into the case's CaseContext directly, through the calls `_cprr` hands out
// (rank_runtime.h's CaptureCalls): this module does not link libcprr_pyrank.so.
//
// torch's RecordFunction calls plain function pointers, with no user data: the capture running
// on a thread is therefore a thread_local, set while a case body runs on it. torch hands its
// thread-local state (these callbacks, and the Python dispatch mode, included) to its own worker
// threads:
// - autograd's device threads run a CUDA backward for the case: its ops are the case's, and the
//   dispatch mode logs them, the nodes' and the engine's own between nodes (a broadcast input's
//   gradient summed to its shape, two gradients of one tensor added). A thread that has run a
//   backward node (RecordScope::BACKWARD_FUNCTION) is autograd's: from then on it works for
//   whichever case is captured (g_case: one case runs in a rank process at a time);
// - Gloo's work threads run staging copies, ops of no case code and no backward node: not
//   logged (the dispatch mode does not log them either).
// Every call into the capture holds the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "python/native/capture/kernel_params.h"
#include "python/native/capture/op_capture.h"
#include "python/native/rank_runtime.h"

namespace py = pybind11;

namespace cprr::python::capture {
namespace {

/// The case's native context (rank_runtime.h), through its CaptureCalls, and, when counting,
/// CUPTI's count.
class NativeSink final : public OpSink {
 public:
  NativeSink(CaseContext& ctx, const CaptureCalls& calls, bool counting)
      : ctx_(ctx), calls_(calls), counting_(counting) {}
  uint32_t track(const std::string& name, uint64_t address, uint64_t bytes, bool device,
                 uint64_t native_stream, int64_t written_by, int64_t symmetric_offset) override {
    return calls_.track(ctx_, name, address, bytes, device, native_stream, written_by,
                        symmetric_offset);
  }
  void untrack(uint32_t buffer, int stream) override { calls_.untrack(ctx_, buffer, stream); }
  std::pair<uint64_t, bool> library_op(const std::string& kind, const std::string& name, int stream,
                                       uint64_t native_stream, const std::vector<Touch>& reads,
                                       const std::vector<Touch>& writes, bool moves) override {
    return calls_.library_op(ctx_, kind, name, stream, native_stream, reads, writes, moves);
  }
  void library_order(const std::string& kind, const std::string& name, int stream,
                     int64_t event) override {
    calls_.library_order(ctx_, kind, name, stream, event);
  }
  void synchronize_library() override {
    py::gil_scoped_release nogil;  // as the Python binding does: the device may take a while
    calls_.synchronize_library(ctx_);
  }
  std::vector<uint64_t> torch_released() override { return calls_.torch_released(ctx_); }
  void torch_record_stream(uint64_t address, uint64_t native_stream) override {
    calls_.torch_record_stream(ctx_, address, native_stream);
  }
  void seen_enter() override {
    if (counting_) calls_.enter_seen();
  }
  void seen_leave() override {
    if (counting_) calls_.leave_seen();
  }
  void unseen_forgive() override {
    if (counting_) calls_.forgive_pending();
  }
  bool logs_launches() const override { return counting_; }
  void hook_launches(const LaunchHooks& hooks, void* user) override {
    calls_.set_launch_hook(hooks, user);
  }
  std::optional<std::pair<uint64_t, bool>> library_copy(const std::string& name, int stream,
                                                        uint64_t native_stream, uint64_t dst,
                                                        uint64_t src, uint64_t bytes,
                                                        bool is_set) override {
    return calls_.library_copy(ctx_, name, stream, native_stream, dst, src, bytes, is_set);
  }
  std::pair<uint64_t, bool> library_launch(const std::string& name, int stream,
                                           uint64_t native_stream,
                                           const std::vector<std::pair<uint64_t, uint64_t>>& layout,
                                           const std::vector<std::byte>& values) override {
    return calls_.library_launch(ctx_, name, stream, native_stream, layout, values);
  }

 private:
  CaseContext& ctx_;
  const CaptureCalls& calls_;
  bool counting_;
};

/// A Python object with CaseContext's methods (a test's fake, the profile's Idle) and a
/// counter with the _cprr module's seen_enter/seen_leave/unseen_forgive, or None.
class PySink final : public OpSink {
 public:
  PySink(py::object native, py::object counter)
      : native_(std::move(native)), counter_(std::move(counter)) {}
  uint32_t track(const std::string& name, uint64_t address, uint64_t bytes, bool device,
                 uint64_t native_stream, int64_t written_by, int64_t symmetric_offset) override {
    py::object r =
        symmetric_offset >= 0
            ? native_.attr("track")(name, address, bytes, device, native_stream, written_by,
                                    py::arg("symmetric_offset") = symmetric_offset)
            : native_.attr("track")(name, address, bytes, device, native_stream, written_by);
    return r.cast<uint32_t>();
  }
  void untrack(uint32_t buffer, int stream) override { native_.attr("untrack")(buffer, stream); }
  std::pair<uint64_t, bool> library_op(const std::string& kind, const std::string& name, int stream,
                                       uint64_t native_stream, const std::vector<Touch>& reads,
                                       const std::vector<Touch>& writes, bool moves) override {
    py::tuple r = native_.attr("library_op")(kind, name, stream, native_stream, reads, writes,
                                             py::arg("moves") = moves);
    return {r[0].cast<uint64_t>(), r[1].cast<bool>()};
  }
  void library_order(const std::string& kind, const std::string& name, int stream,
                     int64_t event) override {
    native_.attr("library_order")(kind, name, stream, event);
  }
  void synchronize_library() override { native_.attr("synchronize_library")(); }
  std::vector<uint64_t> torch_released() override {
    return native_.attr("torch_released")().cast<std::vector<uint64_t>>();
  }
  void torch_record_stream(uint64_t address, uint64_t native_stream) override {
    native_.attr("torch_record_stream")(address, native_stream);
  }
  void seen_enter() override { counter("seen_enter"); }
  void seen_leave() override { counter("seen_leave"); }
  void unseen_forgive() override { counter("unseen_forgive"); }

 private:
  void counter(const char* what) {
    if (!counter_.is_none()) counter_.attr(what)();
  }
  py::object native_;
  py::object counter_;
};

/// A side that records nothing, in C++ (tools/device/capture_profile.py: what the capture itself
/// costs, without a Python fake's calls): increasing numbers, as the Python Idle gives.
class NullSink final : public OpSink {
 public:
  uint32_t track(const std::string&, uint64_t, uint64_t, bool, uint64_t, int64_t,
                 int64_t) override {
    return static_cast<uint32_t>(next_++);
  }
  void untrack(uint32_t, int) override {}
  std::pair<uint64_t, bool> library_op(const std::string&, const std::string&, int, uint64_t,
                                       const std::vector<Touch>&, const std::vector<Touch>&,
                                       bool) override {
    return {next_++, false};
  }
  void library_order(const std::string&, const std::string&, int, int64_t) override {}
  void synchronize_library() override {}
  std::vector<uint64_t> torch_released() override { return {}; }
  void torch_record_stream(uint64_t, uint64_t) override {}
  void seen_enter() override {}
  void seen_leave() override {}
  void unseen_forgive() override {}

 private:
  uint64_t next_ = 0;
};

/// file:line of the case code that made the current call: the first Python frame outside
/// torch and cprr, as python/cprr/capture/where.py's caller() says (its `_inside` decides, once per
/// code object: each is kept alive here, so its address names it for as long as this lives).
class Caller {
 public:
  explicit Caller(py::object inside) : inside_(std::move(inside)) {}
  std::string operator()() {
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    std::string found = "?";
    while (frame != nullptr) {
      PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
      const bool inside = this->inside(code);
      if (!inside) {
        const std::string name = py::reinterpret_borrow<py::str>(code->co_filename);
        const size_t slash = name.rfind('/');
        found = (slash == std::string::npos ? name : name.substr(slash + 1)) + ":" +
                std::to_string(PyFrame_GetLineNumber(frame));
      }
      Py_DECREF(code);
      PyFrameObject* back = inside ? PyFrame_GetBack(frame) : nullptr;  // new reference
      Py_DECREF(frame);
      frame = back;
    }
    return found;
  }

 private:
  bool inside(PyCodeObject* code) {
    auto it = codes_.find(code);
    if (it == codes_.end()) {
      py::handle file(code->co_filename);
      const bool in = inside_(file).cast<bool>();
      it = codes_
               .emplace(
                   code,
                   Code{py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(code)), in})
               .first;
    }
    return it->second.inside;
  }
  struct Code {
    py::object keep;
    bool inside;
  };
  py::object inside_;
  std::unordered_map<PyCodeObject*, Code> codes_;
};

at::Tensor tensor_of(py::handle obj) {
  if (!THPVariable_Check(obj.ptr())) throw py::type_error("expected a torch.Tensor");
  return THPVariable_Unpack(obj.ptr());
}

std::vector<at::Tensor> tensors_of_list(const py::iterable& objs) {
  std::vector<at::Tensor> out;
  for (py::handle o : objs) out.push_back(tensor_of(o));
  return out;
}

/// One case's capture, as the Python side holds it.
class Capture {
 public:
  Capture(std::unique_ptr<OpSink> sink, PlanCache& plans, OpCapture::Options options,
          py::object inside, py::object space)
      : sink_(std::move(sink)),
        caller_(std::make_shared<Caller>(std::move(inside))),
        space_(std::move(space)),
        capture_(
            *sink_, plans, options, [c = caller_] { return (*c)(); }, place()) {}

  OpCapture& capture() { return capture_; }
  std::string where() { return capture_.where(); }

  /// A failure inside a callback (RecordFunction swallows what its callbacks throw): the
  /// first one, raised by the Python side once the body returns.
  void failed(const std::string& what) {
    if (error_.empty()) error_ = what;
  }
  const std::string& error() const { return error_; }

 private:
  Place place() {
    if (space_.is_none()) return {};
    return [space = space_](uint64_t address) -> std::optional<int64_t> {
      if (py::len(space.attr("_windows")) == 0) return std::nullopt;
      py::object p = space.attr("place")(address);
      if (p.is_none()) return std::nullopt;
      return p.cast<int64_t>();
    };
  }

  std::unique_ptr<OpSink> sink_;
  std::shared_ptr<Caller> caller_;
  py::object space_;
  OpCapture capture_;
  std::string error_;
};

// The capture running on this thread (see the file's comment), and its nesting: > 0 while an op
// the capture took runs, or the capture itself works.
thread_local Capture* t_running = nullptr;
thread_local int t_depth = 0;
// The capture of the case the process runs, for torch's autograd threads (the file's comment).
std::atomic<Capture*> g_case{nullptr};
// Whether this thread has run a backward node without a capture of its own: autograd's.
thread_local bool t_autograd = false;

/// The capture this thread's ops belong to: its own, or on autograd's threads the case's.
Capture* running_here() {
  if (t_running != nullptr) return t_running;
  return t_autograd ? g_case.load() : nullptr;
}

// A backward node's start (its own callback, which needs no inputs or outputs). Only a start
// marks the thread: the engine's work after the node ends (summing a gradient to its input's
// shape, adding two gradients of one tensor) is the backward's as much as the node's.
std::unique_ptr<at::ObserverContext> on_node_start(const at::RecordFunction&) {
  if (t_running == nullptr) t_autograd = true;
  return nullptr;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Capture* c = running_here();
  if (c == nullptr || t_depth > 0) return nullptr;
  ++t_depth;  // what the capture itself runs (is_pinned) is no op of the case
  try {
    py::gil_scoped_acquire gil;
    if (std::unique_ptr<OpInFlight> op = c->capture().start(fn)) {
      op->owner = c;
      return op;
    }
  } catch (const std::exception& e) {
    c->failed(std::string("cprr's op capture, at the start of ") + fn.name() + ": " + e.what());
  }
  --t_depth;
  return nullptr;
}

// CPRR_LAUNCH_DEBUG=FILE: a line per launch the hook is offered, with what became of it.
const char* launch_debug_path() {
  static const char* const path = std::getenv("CPRR_LAUNCH_DEBUG");
  return path;
}

void debug_launch(const SeenLaunch& launch, const char* what) {
  const char* path = launch_debug_path();
  if (path == nullptr) return;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s [handle kind %d, %s]: %s\n", kernel_name(launch.symbol).c_str(),
                 static_cast<int>(launch.kind), launch.params ? "params" : "no params", what);
    std::fclose(f);
  }
}

// Handles whose parameters could not be read once: not asked again (a kernel launched in a loop
// pays for the failed lookups once; a handle reused by another kernel is only counted).
thread_local std::set<std::pair<SeenLaunch::Handle, const void*>> t_unreadable;

std::optional<KernelArgs> readable_args(const SeenLaunch& launch) {
  if (t_unreadable.count({launch.kind, launch.handle})) return std::nullopt;
  const std::optional<SeenLaunch> driver = with_driver_handle(launch);
  if (!driver) debug_launch(launch, "no driver handle for the host stub");
  std::optional<KernelArgs> args =
      driver ? kernel_args(*driver, cuda_param_info(driver->kind)) : std::nullopt;
  if (driver && !args && launch_debug_path() != nullptr) {  // the driver asked again, for why
    const std::string why = "its parameters could not be read (first query: " +
                            std::to_string(first_param_status(*driver)) + ")";
    debug_launch(*driver, why.c_str());
  }
  if (!args) t_unreadable.insert({launch.kind, launch.handle});
  return args;
}

// Runs `log` (what the capture does with work past the dispatcher, a LaunchLogged) as the
// capture's own work, on the case's thread only (the one CUPTI's counter watches); a failure
// fails the case, saying `where`.
template <typename Log>
LaunchLogged capture_work(void* user, const std::string& where, Log log) {
  auto* c = static_cast<Capture*>(user);
  if (t_running != c || t_depth > 0) return LaunchLogged::no;
  ++t_depth;  // what logging it launches is cprr's own
  LaunchLogged logged = LaunchLogged::no;
  try {
    logged = log(*c);
  } catch (const std::exception& e) {
    c->failed("cprr's op capture, " + where + ": " + e.what());
  }
  --t_depth;
  return logged;
}

LaunchLogged as_logged(std::optional<bool> sync_after) {
  if (!sync_after) return LaunchLogged::no;
  return *sync_after ? LaunchLogged::sync_after : LaunchLogged::yes;
}

// A kernel launched past the dispatcher on the case's thread (unseen_work.h's launch hook): an
// op of the log when its parameters can be read, else it stays work outside the op log.
LaunchLogged on_launch(void* user, const SeenLaunch& launch) {
  const std::string name = kernel_name(launch.symbol);
  return capture_work(user, "at the launch of " + name, [&](Capture& c) {
    const std::optional<KernelArgs> args = readable_args(launch);
    if (!args) return LaunchLogged::no;
    debug_launch(launch, "logged");
    py::gil_scoped_acquire gil;
    return as_logged(c.capture().launched(name, reinterpret_cast<uint64_t>(launch.stream),
                                          args->layout, args->values));
  });
}

// A copy or memset past the dispatcher on the case's thread: an op with its exact extent.
LaunchLogged on_copy(void* user, const SeenCopy& copy) {
  return capture_work(user, "at a copy", [&](Capture& c) {
    py::gil_scoped_acquire gil;
    return as_logged(c.capture().copied(copy.api ? copy.api : "copy",
                                        reinterpret_cast<uint64_t>(copy.stream), copy.dst, copy.src,
                                        copy.bytes, copy.is_set));
  });
}

// The launch or copy a hook asked a sync after is issued: a replay's sync bisection syncs here.
void on_launch_done(void* user) {
  capture_work(user, "syncing after a launch", [](Capture& c) {
    py::gil_scoped_acquire gil;
    c.capture().sink().synchronize_library();
    return LaunchLogged::no;
  });
}

// _kernel_args's layout for the ParamInfo it passes (a plain function pointer, no user data).
thread_local std::vector<std::pair<uint64_t, uint64_t>> t_test_layout;

std::optional<std::pair<uint64_t, uint64_t>> test_param_info(const void*, size_t index) {
  if (index >= t_test_layout.size()) return std::nullopt;
  return t_test_layout[index];
}

/// kernel_args on a launch built from Python values, for tests: `params` the parameters' bytes
/// (kernelParams), or `packed` the `extra` buffer; `layout` what cuFuncGetParamInfo would say
/// (None: the driver has no such call). Returns (layout, bytes), or None.
py::object kernel_args_for_test(std::optional<std::vector<py::bytes>> params,
                                std::optional<py::bytes> packed,
                                std::optional<std::vector<std::pair<uint64_t, uint64_t>>> layout) {
  std::vector<std::string> values;
  std::vector<void*> pointers;
  if (params) {
    for (const py::bytes& b : *params) values.push_back(b);
    for (std::string& v : values) pointers.push_back(v.data());
  }
  std::string buffer = packed ? std::string(*packed) : std::string();
  size_t size = buffer.size();
  void* extra[] = {reinterpret_cast<void*>(0x01), buffer.data(), reinterpret_cast<void*>(0x02),
                   &size, nullptr};
  SeenLaunch launch;
  launch.params = params ? pointers.data() : nullptr;
  launch.extra = packed ? extra : nullptr;
  t_test_layout = layout.value_or(std::vector<std::pair<uint64_t, uint64_t>>{});
  const std::optional<KernelArgs> args = kernel_args(launch, layout ? &test_param_info : nullptr);
  if (!args) return py::none();
  return py::make_tuple(args->layout, py::bytes(reinterpret_cast<const char*>(args->values.data()),
                                                args->values.size()));
}

// Kernels, copies and memsets issued past the dispatcher are ops, unless
// CPRR_LAUNCH_CAPTURE=0: then they are only counted as outside the op log. On by default: the
// GPU corpora (python, python_gpu, python_launch, python_graphs) give the same verdicts with
// it as without, at about the cost of counting them (docs/PERFORMANCE.md).
bool launch_capture_on() {
  const char* v = std::getenv("CPRR_LAUNCH_CAPTURE");
  return v == nullptr || std::string_view(v) != "0";
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx == nullptr) return;
  auto& op = static_cast<OpInFlight&>(*ctx);
  Capture* c = running_here();
  try {
    if (c == op.owner) {
      py::gil_scoped_acquire gil;
      c->capture().end(fn, op);
    }
  } catch (const std::exception& e) {
    c->failed(std::string("cprr's op capture, at the end of ") + fn.name() + ": " + e.what());
  }
  --t_depth;
}

/// Capture::start's registration on the calling thread (RAII in the Python object's hands).
class Running {
 public:
  explicit Running(Capture& c) {
    if (t_running != nullptr) {
      throw std::runtime_error("another cprr op capture is running on this thread");
    }
    Capture* none = nullptr;
    if (!g_case.compare_exchange_strong(none, &c)) {
      throw std::runtime_error("another cprr op capture is running in this process");
    }
    t_running = &c;
    if (launch_capture_on() && c.capture().sink().logs_launches()) {
      hooked_ = &c.capture().sink();
      hooked_->hook_launches(LaunchHooks{&on_launch, &on_copy, &on_launch_done}, &c);
    }
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
    nodes_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(on_node_start).scopes({at::RecordScope::BACKWARD_FUNCTION}));
  }
  ~Running() { stop(); }
  void stop() {
    if (handle_ == 0) return;
    if (hooked_ != nullptr) hooked_->hook_launches(LaunchHooks{}, nullptr);
    hooked_ = nullptr;
    at::removeCallback(handle_);
    at::removeCallback(nodes_);
    handle_ = nodes_ = 0;
    g_case.store(nullptr);
    t_running = nullptr;
  }

 private:
  at::CallbackHandle handle_ = 0;
  at::CallbackHandle nodes_ = 0;  ///< backward nodes (no inputs or outputs needed)
  OpSink* hooked_ = nullptr;      ///< the sink whose launch hook this run installed
};

}  // namespace
}  // namespace cprr::python::capture

using cprr::python::CaptureCalls;
using cprr::python::CaseContext;
using namespace cprr::python::capture;

PYBIND11_MODULE(_cprr_torch, m) {
  m.doc() = "cprr's op capture in C++ (torch's RecordFunction callbacks)";

  py::class_<PlanCache>(m, "PlanCache").def(py::init<>());
  m.def("_kernel_args", &kernel_args_for_test, py::arg("params"), py::arg("packed"),
        py::arg("layout"));
  m.def("_kernel_name", &kernel_name);
  m.def("_launch_capture_on", &launch_capture_on);

  py::class_<Running>(m, "Running").def("stop", &Running::stop);

  py::class_<Capture>(m, "Capture")
      .def(py::init([](py::object native, uint64_t native_address, uint64_t calls_address,
                       py::object counter, PlanCache& plans, bool device_backend, bool allocator,
                       int device_index, py::object inside, py::object space, bool null_sink) {
             std::unique_ptr<OpSink> sink;
             if (null_sink) {
               sink = std::make_unique<NullSink>();
             } else if (native_address != 0) {
               sink = std::make_unique<NativeSink>(
                   *reinterpret_cast<CaseContext*>(native_address),
                   *reinterpret_cast<const CaptureCalls*>(calls_address),
                   !counter.is_none() && py::bool_(counter));
             } else {
               sink = std::make_unique<PySink>(native, counter);
             }
             return std::make_unique<Capture>(
                 std::move(sink), plans,
                 OpCapture::Options{device_backend, allocator, device_index}, std::move(inside),
                 std::move(space));
           }),
           py::arg("native"), py::arg("native_address"), py::arg("calls_address"),
           py::arg("counter"), py::arg("plans"), py::arg("device_backend"), py::arg("allocator"),
           py::arg("device_index"), py::arg("inside"), py::arg("space"),
           py::arg("null_sink") = false, py::keep_alive<1, 6>())
      .def("run", [](Capture& c) { return std::make_unique<Running>(c); })
      .def_property_readonly("error", &Capture::error)
      .def_property_readonly("host", [](Capture& c) { return c.capture().order().host(); })
      .def("where", &Capture::where)
      .def("touches",
           [](Capture& c, const py::iterable& ts) {
             return c.capture().tensors().touches(tensors_of_list(ts));
           })
      .def("stream_of",
           [](Capture& c, int device_index) {
             return c.capture().order().stream_of(
                 device_index < 0
                     ? std::nullopt
                     : std::optional<c10::Device>(c10::Device(
                           c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_index))));
           })
      .def(
          "order",
          [](Capture& c, const std::string& kind, const std::string& what, int stream,
             int64_t event) { c.capture().order().order(kind.c_str(), what, stream, event); },
          py::arg("kind"), py::arg("what"), py::arg("stream"), py::arg("event") = -1)
      .def("stream", [](Capture& c, uint64_t h) { return c.capture().order().numbers().stream(h); })
      .def("event", [](Capture& c, uint64_t h) { return c.capture().order().numbers().event(h); })
      .def("forget_event",
           [](Capture& c, uint64_t h) { c.capture().order().numbers().forget_event(h); })
      .def("new_stream", [](Capture& c) { return c.capture().order().numbers().new_stream(); })
      .def("new_event", [](Capture& c) { return c.capture().order().numbers().new_event(); })
      .def("used_by",
           [](Capture& c, const py::iterable& ts, int stream) {
             c.capture().tensors().used_by(tensors_of_list(ts), stream);
           })
      .def("track_unwritten",
           [](Capture& c, py::handle t, const std::string& label) {
             c.capture().tensors().track_unwritten(tensor_of(t), label);
           })
      .def("registered",
           [](Capture& c, py::handle t, int64_t place) {
             const at::Tensor tensor = tensor_of(t);
             c.capture().marks().registered(tensor, key_of(tensor), place,
                                            c.capture().order().host(), c.where());
           })
      .def("adopt", [](Capture& c, py::handle t,
                       uint32_t buffer) { c.capture().tensors().adopt(tensor_of(t), buffer); })
      .def("freed", [](Capture& c, int device_index,
                       uint64_t address) { c.capture().freed(device_index, address); })
      .def("count_outside",
           [](Capture& c, const std::string& what) { c.capture().outside().count(what); })
      .def("enter_op", [](Capture& c) { c.capture().outside().enter(); })
      .def("leave_op", [](Capture& c) { c.capture().outside().leave(); })
      // cprr's own aten work on this thread (cprr.distributed.staging's host copies): no op of the
      // case, and its CUDA work is not outside the op log.
      .def("enter_own",
           [](Capture& c) {
             ++t_depth;
             c.capture().outside().enter();
           })
      .def("leave_own",
           [](Capture& c) {
             c.capture().outside().leave();
             --t_depth;
           })
      .def_property_readonly("inside_op", [](Capture& c) { return c.capture().outside().inside(); })
      .def("finish", [](Capture& c) { c.capture().finish(); })
      .def("outside_counts", [](Capture& c) { return c.capture().outside().counts(); });
}
