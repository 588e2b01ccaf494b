#pragma once
// Where the op capture's log goes: the case's native context (rank_runtime.h's CaseContext and
// the CUPTI count, in the worker) or a Python object with the same methods (a test's recording
// fake, the profile's Idle side). One seam, so the capture's logic is tested against fakes and
// compared call for call with the Python dispatch mode (tests/python/test_native_capture.py).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "python/native/unseen_work.h"

namespace cprr::python::capture {

/// Bytes an op touches: (buffer id from track, offset in it, length); CaseContext::Touch.
using Touch = std::tuple<uint32_t, uint64_t, uint64_t>;

/// The calls the capture makes; each mirrors CaseContext's (rank_runtime.h) and the CUPTI
/// count's (unseen_work.h).
class OpSink {
 public:
  virtual ~OpSink() = default;
  virtual uint32_t track(const std::string& name, uint64_t address, uint64_t bytes, bool device,
                         uint64_t native_stream, int64_t written_by, int64_t symmetric_offset) = 0;
  virtual void untrack(uint32_t buffer, int stream) = 0;
  virtual std::pair<uint64_t, bool> library_op(const std::string& kind, const std::string& name,
                                               int stream, uint64_t native_stream,
                                               const std::vector<Touch>& reads,
                                               const std::vector<Touch>& writes, bool moves) = 0;
  virtual void library_order(const std::string& kind, const std::string& name, int stream,
                             int64_t event) = 0;
  virtual void synchronize_library() = 0;
  virtual std::vector<uint64_t> torch_released() = 0;
  virtual void torch_record_stream(uint64_t address, uint64_t native_stream) = 0;
  /// The CUPTI count (none: these do nothing).
  virtual void seen_enter() = 0;
  virtual void seen_leave() = 0;
  virtual void unseen_forgive() = 0;
  /// Kernels seen only as launches (unseen_work.h's launch hook): whether this sink logs them,
  /// the hook's installation (nullptr: removal) and the launch's op (CaseContext's).
  virtual bool logs_launches() const { return false; }
  virtual void hook_launches(const LaunchHooks& /*hooks*/, void* /*user*/) {}
  virtual std::pair<uint64_t, bool> library_launch(
      const std::string& /*name*/, int /*stream*/, uint64_t /*native_stream*/,
      const std::vector<std::pair<uint64_t, uint64_t>>& /*layout*/,
      const std::vector<std::byte>& /*values*/) {
    throw std::logic_error("this op sink logs no launches");
  }
  virtual std::optional<std::pair<uint64_t, bool>> library_copy(
      const std::string& /*name*/, int /*stream*/, uint64_t /*native_stream*/, uint64_t /*dst*/,
      uint64_t /*src*/, uint64_t /*bytes*/, bool /*is_set*/) {
    throw std::logic_error("this op sink logs no copies");
  }
};

}  // namespace cprr::python::capture
