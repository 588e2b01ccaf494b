#include "python/native/capture/op_schema.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace cprr::python::capture {
namespace {

// The sets of python/cprr/capture/op_schema.py, which says why each op is in its set.
const std::set<std::string_view> kEmpty = {"empty", "empty_like", "new_empty", "empty_strided",
                                           "new_empty_strided"};
const std::set<std::string_view> kMetadata = {
    "is_pinned",    "is_contiguous",  "is_non_overlapping_and_dense",
    "size",         "stride",         "numel",
    "dim",          "storage_offset", "sym_size",
    "sym_stride",   "sym_numel",      "sym_storage_offset",
    "is_same_size", "is_complex",     "is_floating_point",
    "is_signed",    "is_conj",        "is_neg",
    "is_inference", "is_coalesced",   "is_set_to",
    "_nnz",         "_is_zerotensor", "_has_same_storage_numel",
    "is_leaf",      "output_nr",      "_version",
    "data_ptr"};
const std::set<std::string_view> kReadModify = {
    "add",        "sub",         "mul",         "div",         "true_divide", "floor_divide",
    "addcmul",    "addcdiv",     "addmm",       "addmv",       "addbmm",      "baddbmm",
    "addr",       "lerp",        "pow",         "clamp",       "clamp_min",   "clamp_max",
    "clip",       "neg",         "abs",         "exp",         "expm1",       "log",
    "log1p",      "log2",        "log10",       "sqrt",        "rsqrt",       "sigmoid",
    "tanh",       "relu",        "gelu",        "silu",        "floor",       "ceil",
    "round",      "trunc",       "frac",        "sign",        "reciprocal",  "fmod",
    "remainder",  "bitwise_and", "bitwise_or",  "bitwise_xor", "bitwise_not", "logical_and",
    "logical_or", "logical_xor", "logical_not", "square",      "sin",         "cos",
    "erf",        "hardtanh",    "leaky_relu",  "elu",         "threshold",   "nan_to_num",
    "cumsum",     "cumprod",     "exponential", "mvlgamma",    "atan2",       "hypot",
    "logit",      "xlogy",       "copysign",    "lt",          "le",          "gt",
    "ge",         "eq",          "ne",          "maximum",     "minimum"};
const std::set<std::string_view> kCopies = {"copy_", "_to_copy", "to", "_copy_from",
                                            "_copy_from_and_resize"};
const std::set<std::string_view> kMoves = {"copy_",       "_copy_from", "_to_copy", "clone",
                                           "_pin_memory", "pin_memory", "cat"};
// Ops whose autograd kernel (torch/csrc/autograd/VariableTypeManual.cpp) does all their work and
// never dispatches further.
const std::set<std::string_view> kAutogradOnly = {"detach_", "set_data", "retain_grad", "_backward",
                                                  "requires_grad_"};
const std::set<std::string_view> kLifts = {"lift_fresh", "lift", "lift_fresh_copy"};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string_view rstrip_underscores(std::string_view s) {
  while (!s.empty() && s.back() == '_') s.remove_suffix(1);
  return s;
}

}  // namespace

Plan::Plan(const c10::FunctionSchema& schema) {
  const std::string& full = schema.name();
  aten = starts_with(full, "aten::");
  name = full.substr(full.find("::") == std::string::npos ? 0 : full.find("::") + 2);
  const bool metadata_only = kEmpty.count(name) || kMetadata.count(name) ||
                             ends_with(name, "_like") || starts_with(name, "new_");
  const bool read_modify = kReadModify.count(rstrip_underscores(name)) > 0;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* alias = args[i].alias_info();
    int role = 0;
    if (alias != nullptr && alias->isWrite()) {
      role = kWrite | (read_modify && !args[i].kwarg_only() ? kRead : 0);
    } else if (alias == nullptr && !metadata_only) {
      role = kRead;
    }
    roles.push_back(role);
    const std::string& arg = args[i].name();
    if (arg == "non_blocking") non_blocking = static_cast<int>(i);
    if (arg == "device") device = static_cast<int>(i);
    if (arg == "memory_format") memory_format = static_cast<int>(i);
    if (arg == "dim") dim = static_cast<int>(i);
  }
  for (const c10::Argument& r : schema.returns()) {
    const bool made =
        r.alias_info() == nullptr && r.type()->str().find("Tensor") != std::string::npos;
    returns.push_back(made);
    makes = makes || made;
  }
  copy = kCopies.count(name) > 0;
  may_move = kMoves.count(name) > 0;
  empty = kEmpty.count(name) > 0;
  lifts = kLifts.count(name) > 0;
  record_stream = name == "record_stream";
  item = name == "_local_scalar_dense";
  autograd_only = kAutogradOnly.count(name) > 0;
}

void tensors_of(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor()) {
    // A Python number an op was called with (x * 2): torch hands it to a dispatch mode as the
    // number, never as a tensor.
    const at::Tensor& t = value.toTensor();
    if (!t.defined() || !t.unsafeGetTensorImpl()->is_wrapped_number()) out.push_back(t);
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList().vec()) out.push_back(t);
  } else if (value.isList()) {
    for (const c10::IValue& v : value.toListRef()) tensors_of(v, out);
  } else if (value.isTuple()) {
    for (const c10::IValue& v : value.toTupleRef().elements()) tensors_of(v, out);
  }
}

Accesses::Accesses(const Plan& plan, c10::ArrayRef<const c10::IValue> args) {
  const size_t n = std::min(args.size(), plan.roles.size());
  for (size_t i = 0; i < n; ++i) {
    const size_t before = every.size();
    tensors_of(args[i], every);
    for (size_t k = before; k < every.size(); ++k) {
      if (plan.roles[i] & kRead) reads.push_back(every[k]);
      if (plan.roles[i] & kWrite) writes.push_back(every[k]);
    }
  }
  drop_host_scalars(plan, args);
}

namespace {

bool host_scalar(const at::Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

}  // namespace

void Accesses::drop_host_scalars(const Plan& plan, c10::ArrayRef<const c10::IValue> args) {
  // A 0-dim CPU tensor given to an op of the GPU (a Python number torch wrapped, fill_'s value)
  // is read by the host as the op is issued, not by the stream later: no stream op reads it.
  if (std::none_of(reads.begin(), reads.end(), host_scalar)) return;
  if (!device_of(plan, every, args) || (plan.copy && crosses(plan, every, args))) return;
  reads.erase(std::remove_if(reads.begin(), reads.end(), host_scalar), reads.end());
}

namespace {

std::optional<c10::Device> device_argument(const Plan& plan,
                                           c10::ArrayRef<const c10::IValue> args) {
  if (plan.device < 0 || static_cast<size_t>(plan.device) >= args.size()) return std::nullopt;
  const c10::IValue& v = args[plan.device];
  if (!v.isDevice()) return std::nullopt;
  return v.toDevice();
}

}  // namespace

std::optional<c10::Device> device_of(const Plan& plan, const std::vector<at::Tensor>& every,
                                     c10::ArrayRef<const c10::IValue> args) {
  for (const at::Tensor& t : every) {
    if (t.is_cuda()) return t.device();
  }
  std::optional<c10::Device> d = device_argument(plan, args);
  if (d && d->is_cuda()) {
    if (!d->has_index()) {
      return c10::Device(c10::DeviceType::CUDA,
                         c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index());
    }
    return d;
  }
  return std::nullopt;
}

bool moves_bytes(const Plan& plan, const Accesses& access, c10::ArrayRef<const c10::IValue> args) {
  if (!plan.may_move || access.reads.empty()) return false;
  int64_t read_elements = 0, written_elements = 0;
  for (const at::Tensor& t : access.reads) {
    if (!t.is_contiguous()) return false;
    read_elements += t.numel();
  }
  for (const at::Tensor& t : access.writes) {
    if (!t.is_contiguous()) return false;
    written_elements += t.numel();
  }
  if (plan.memory_format >= 0 && static_cast<size_t>(plan.memory_format) < args.size()) {
    const c10::IValue& f = args[plan.memory_format];
    if (!f.isNone()) {
      const auto format = static_cast<c10::MemoryFormat>(f.toInt());
      if (format != c10::MemoryFormat::Preserve && format != c10::MemoryFormat::Contiguous) {
        return false;  // a made tensor in another layout (channels_last): not in the reads' order
      }
    }
  }
  if (!access.writes.empty() && read_elements != written_elements) return false;
  if (plan.name != "cat") return true;
  int64_t dim = 0;
  if (plan.dim >= 0 && static_cast<size_t>(plan.dim) < args.size() && args[plan.dim].isInt()) {
    dim = args[plan.dim].toInt();
  }
  for (const at::Tensor& first : access.reads) {
    if (first.dim() == 0) continue;
    const int64_t d = ((dim % first.dim()) + first.dim()) % first.dim();
    int64_t before = 1;
    for (int64_t k = 0; k < d; ++k) before *= first.size(k);
    return before == 1;
  }
  return false;
}

bool crosses(const Plan& plan, const std::vector<at::Tensor>& every,
             c10::ArrayRef<const c10::IValue> args) {
  bool cuda = false, cpu = false;
  for (const at::Tensor& t : every) {
    cuda = cuda || t.is_cuda();
    cpu = cpu || t.device().is_cpu();
  }
  if (std::optional<c10::Device> d = device_argument(plan, args)) {
    cuda = cuda || d->is_cuda();
    cpu = cpu || d->is_cpu();
  }
  return cuda && cpu;
}

bool non_blocking(const Plan& plan, c10::ArrayRef<const c10::IValue> args) {
  if (plan.non_blocking < 0 || static_cast<size_t>(plan.non_blocking) >= args.size()) {
    return false;
  }
  const c10::IValue& v = args[plan.non_blocking];
  return v.isBool() && v.toBool();
}

}  // namespace cprr::python::capture
