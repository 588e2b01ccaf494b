#pragma once
// For your .cu files: CPRR_DEVICE_KERNEL(your::Functor) builds the device launch of a functor
// that ctx.launch() runs as a grid on the cuda backend (declare kDeviceKernel<your::Functor> =
// true next to the functor; see examples/own_kernels.h). Also brings in the CUDA runtime API.
#include "kernels/device_launch.cuh"
