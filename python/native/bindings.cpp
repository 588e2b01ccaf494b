// The `_cprr` extension module: rank_runtime.h for Python. Kept to the binding alone (no cprr
// header beyond rank_runtime.h and case_registration.h, plain types), so it compiles against
// any Python 3 with pybind11 and links with the rank runtime library built once
// (tools/device/build_python.sh builds it on the GPU machine).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "python/native/case_registration.h"
#include "python/native/rank_runtime.h"
#include "python/native/torch_allocator.h"
#include "python/native/unseen_work.h"
#include "runtime/error.h"

namespace py = pybind11;
using cprr::CaseOptions;
using cprr::python::Allocation;
using cprr::python::CaseContext;

namespace {

/// A Python callable for C++ threads that may not hold the GIL: kept in a shared holder released
/// under the GIL. The registry holding it is a static destroyed at exit, after the interpreter
/// finalized: the GIL can never be taken then (it would block forever, and the process with
/// it), and the object went with the interpreter, so it is left.
std::shared_ptr<py::function> held(py::function fn) {
  return std::shared_ptr<py::function>(new py::function(std::move(fn)), [](py::function* f) {
    if (Py_IsInitialized() == 0) return;
    py::gil_scoped_acquire gil;
    delete f;
  });
}

/// `_cprr.CaseOptions`: data/case_info.h's CaseOptions, a property per CaseOptions::fields()
/// entry, built from keywords by the same names. Nothing here names a field.
void bind_case_options(py::module_& m) {
  py::class_<CaseOptions> cls(m, "CaseOptions");
  py::list names;
  CaseOptions::fields([&](const char* name, auto member) {
    names.append(name);
    using T = std::remove_reference_t<decltype(std::declval<CaseOptions&>().*member)>;
    if constexpr (std::is_same_v<T, cprr::Expect>) {  // its text: pass | fail | crash | hang
      cls.def_property(
          name, [member](const CaseOptions& o) { return cprr::python::expect_text(o.*member); },
          [member](CaseOptions& o, const std::string& v) {
            o.*member = cprr::python::expect_of(v);
          });
    } else if constexpr (std::is_same_v<T, std::vector<cprr::GridAxis>>) {  // [(axis, [text])]
      using Axes = std::vector<std::pair<std::string, std::vector<std::string>>>;
      cls.def_property(
          name,
          [member](const CaseOptions& o) {
            Axes axes;
            for (const cprr::GridAxis& a : o.*member) axes.emplace_back(a.name, a.values);
            return axes;
          },
          [member](CaseOptions& o, Axes axes) {
            (o.*member).clear();
            for (auto& [axis, values] : axes) {
              (o.*member).push_back(cprr::GridAxis{std::move(axis), std::move(values)});
            }
          });
    } else {
      cls.def_readwrite(name, member);
    }
  });
  cls.attr("fields") = py::tuple(names);
  // CaseOptions(**fields): the C++ defaults, then each keyword set by name (an unknown one is
  // a TypeError naming it, not a field silently dropped).
  cls.def(py::init([names](const py::kwargs& given) {
    auto o = std::make_unique<CaseOptions>();
    {  // a view of *o for the properties' setters, gone before pybind11 owns *o
      py::object view = py::cast(o.get(), py::return_value_policy::reference);
      for (const auto& [key, value] : given) {
        if (!names.contains(key)) {
          throw py::type_error(py::str("CaseOptions has no field '{}' (its fields: {})")
                                   .format(key, py::str(", ").attr("join")(names)));
        }
        py::setattr(view, key, value);
      }
    }
    return o;
  }));
}

}  // namespace

PYBIND11_MODULE(_cprr, m) {
  m.doc() = "cprr's rank side (protocol, flight record, capture hashing, arenas) for Python cases";

  py::class_<Allocation>(m, "Allocation")
      .def_readonly("id", &Allocation::id)
      .def_readonly("address", &Allocation::address)
      .def_readonly("bytes", &Allocation::bytes)
      .def_readonly("device", &Allocation::device);
  m.attr("NO_NATIVE_STREAM") = CaseContext::kNoNativeStream;

  // How a world's collectives travel: the controller's choice, handed to the Python side as
  // this enum (cprr.distributed.process_group decides torch's backend and staging from it).
  py::enum_<cprr::CollectiveTransport>(m, "Transport")
      .value("nccl", cprr::CollectiveTransport::nccl)
      .value("gloo_staged", cprr::CollectiveTransport::gloo_staged)
      .value("gloo", cprr::CollectiveTransport::gloo);

  py::class_<CaseContext>(m, "CaseContext")
      .def_property_readonly("rank", &CaseContext::rank)
      .def_property_readonly("world_size", &CaseContext::world_size)
      .def_property_readonly("seed", &CaseContext::seed)
      .def_property_readonly("execution", &CaseContext::execution)
      .def_property_readonly("case_name", &CaseContext::case_name)
      .def_property_readonly("params", &CaseContext::params)
      .def_property_readonly("device_index", &CaseContext::device_index)
      .def_property_readonly("backend", &CaseContext::backend)
      .def_property_readonly("transport", &CaseContext::transport)
      // The object's address, for the C++ op capture (_cprr_torch) to log into it directly.
      .def_property_readonly("address",
                             [](CaseContext& c) { return reinterpret_cast<uintptr_t>(&c); })
      .def("capture", &CaseContext::capture, py::arg("is_output"), py::arg("name"),
           py::arg("address"), py::arg("bytes"), py::arg("dtype"), py::arg("shape"),
           py::arg("native_stream"), py::arg("host") = false)
      .def("enter_collective", &CaseContext::enter_collective, py::arg("kind"), py::arg("dtype"),
           py::arg("bytes"), py::arg("root"), py::arg("op"), py::arg("stream"),
           py::arg("group") = 0, py::arg("members") = 0, py::arg("where") = "",
           py::arg("send_bytes") = std::vector<uint64_t>{},
           py::arg("recv_bytes") = std::vector<uint64_t>{}, py::arg("row_bytes") = 0)
      .def("complete_collective", &CaseContext::complete_collective)
      .def("collective_raised", &CaseContext::collective_raised)
      .def("enter_p2p", &CaseContext::enter_p2p, py::arg("kind"), py::arg("peer"), py::arg("dtype"),
           py::arg("bytes"), py::arg("group") = 0, py::arg("members") = 0, py::arg("where") = "")
      .def("note_group", &CaseContext::note_group)
      .def("track", &CaseContext::track, py::arg("name"), py::arg("address"), py::arg("bytes"),
           py::arg("device"), py::arg("native_stream"), py::arg("written_by"),
           py::arg("symmetric_offset") = -1)
      .def("untrack", &CaseContext::untrack)
      .def("library_op", &CaseContext::library_op, py::arg("kind"), py::arg("name"),
           py::arg("stream"), py::arg("native_stream"), py::arg("reads"), py::arg("writes"),
           py::arg("moves") = false, py::arg("touches") = std::vector<CaseContext::Touch>{})
      .def("library_order", &CaseContext::library_order)
      .def("graph_begin", &CaseContext::graph_begin)
      .def("graph_end", &CaseContext::graph_end)
      .def("graph_launch", &CaseContext::graph_launch)
      .def("synchronize_library", &CaseContext::synchronize_library,
           py::call_guard<py::gil_scoped_release>())
      .def("hold_probe", &CaseContext::hold_probe)
      .def("release_probe", &CaseContext::release_probe, py::call_guard<py::gil_scoped_release>())
      .def("note_unseen", &CaseContext::note_unseen)
      .def("distrust_transport", &CaseContext::distrust_transport)
      .def("torch_released", &CaseContext::torch_released)
      .def("torch_record_stream", &CaseContext::torch_record_stream)
      .def("alloc", &CaseContext::alloc)
      .def("free", &CaseContext::free);

  bind_case_options(m);
  m.def(
      "add_case",
      [](std::string name, CaseOptions options, py::function body) {
        // The worker calls bodies without the GIL (serve released it): take it for the call.
        auto fn = held(std::move(body));
        cprr::python::add_case(
            std::move(name), std::move(options), [fn](CaseContext& ctx) -> std::string {
              py::gil_scoped_acquire gil;
              py::object failed = (*fn)(py::cast(&ctx, py::return_value_policy::reference));
              if (py::isinstance<py::tuple>(failed)) {  // ("skip", reason)
                throw cprr::CaseSkipped(failed.cast<py::tuple>()[1].cast<std::string>());
              }
              return failed.is_none() ? std::string() : failed.cast<std::string>();
            });
      },
      py::arg("name"), py::arg("options"), py::arg("body"));
  m.def(
      "on_connected",
      [](py::function hook) {
        auto fn = held(std::move(hook));
        cprr::python::add_connected_hook(
            [fn](cprr::CollectiveTransport transport, int device_index) {
              py::gil_scoped_acquire gil;
              try {
                return (*fn)(transport, device_index).cast<std::string>();
              } catch (py::error_already_set& e) {  // as text: the GIL is released past here
                throw std::runtime_error(e.what());
              }
            });
      },
      "Runs hook(transport, device_index) once the rank's world joined its communicator, "
      "before its first case; it returns the start-up phase it names ('' for none), and what it "
      "raises fails the world's start.");
  m.def("add_error", &cprr::python::add_error);
  m.def("add_source_file", &cprr::python::add_source_file);
  m.def("case_names", &cprr::python::case_names);
  m.def(
      "serve",
      [](const std::vector<std::string>& argv) {
        py::gil_scoped_release nogil;  // the worker blocks on its channel between cases
        return cprr::python::serve(argv);
      },
      "Runs the rank process's worker loop with these arguments (argv[0] first); returns its exit "
      "status.");
  m.def("unseen_start", &cprr::python::start_unseen_counter,
        "Starts counting CUDA work outside the op log (CUPTI from the first of these libraries "
        "that opens); returns '' when counting, else why not.");
  m.def("unseen_watch", &cprr::python::watch_this_thread);
  m.def("seen_enter", &cprr::python::enter_seen);
  m.def("unseen_forgive", &cprr::python::forgive_pending);
  m.def("seen_leave", &cprr::python::leave_seen);
  m.def("unseen_take", &cprr::python::take_unseen);
  m.def("use_torch_allocator", &cprr::python::use_torch_allocator,
        "torch's CUDA allocator is now cprr_torch_alloc/cprr_torch_free (libcprr_pyrank.so): "
        "every case serves them from its rank's device arena.");
  m.def("torch_allocator_used", &cprr::python::torch_allocator_used);
  m.def(
      "torch_memory",
      [] {
        const cprr::python::TorchMemory m = cprr::python::torch_memory();
        return std::make_pair(m.allocated, m.peak);
      },
      "(bytes torch holds through cprr's allocator now, the most since the last reset)");
  m.def("reset_torch_peak", &cprr::python::reset_torch_peak);
  m.def(
      "capture_calls", [] { return reinterpret_cast<uintptr_t>(&cprr::python::capture_calls()); },
      "The address of CaseContext's calls for the C++ op capture (rank_runtime.h's "
      "CaptureCalls).");
  m.attr("PROTOCOL_VERSION") = cprr::python::protocol_version();
  m.attr("DEFAULT_MASTER_PORT") = cprr::python::default_master_port();
}
