#pragma once
// Registering a Python case with its options: data/case_info.h's CaseOptions, the one
// description of them, as `_cprr.CaseOptions` builds it (bindings.cpp). Apart from
// rank_runtime.h because case_info.h is C++20 (defaulted comparisons) and the C++ op capture
// (capture/, `_cprr_torch`) includes rank_runtime.h as C++17, as torch's headers want.
#include <string>

#include "data/case_info.h"
#include "python/native/rank_runtime.h"

namespace cprr::python {

/// Expect as `_cprr.CaseOptions.expect` spells it: text_forms.h's names, for the binding, which
/// sees no cprr library's symbols. expect_of throws std::invalid_argument naming the choices.
std::string expect_text(Expect e);
Expect expect_of(const std::string& name);

/// Registers a case in the process's registry (the one cpworker's cases use).
void add_case(std::string name, CaseOptions options, Body body);

}  // namespace cprr::python
