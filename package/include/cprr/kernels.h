#pragma once
// The single-source kernel functors the corpus uses (<cprr/kernels.h>): FillIota, FillRandom,
// Axpy, ... Each has a device build in the installed cprr_kernels, so a case compiled by the host
// compiler launches them on both backends.
#include "kernels/corpus_kernels.h"
