#pragma once
// A kernel's name as cprr prints it: CUPTI's symbol, demangled when it is a C++ name. Header
// only: the `_cprr_torch` module and libcprr_pyrank both use it and neither links the other.
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace cprr::python {

inline std::string kernel_name(const char* symbol) {
  if (symbol == nullptr || *symbol == '\0') return "kernel";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(symbol, nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(symbol);
}

}  // namespace cprr::python
