# Every third-party dependency is a Debian package (tools/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(Gloo REQUIRED)          # target: gloo
find_package(cereal REQUIRED)        # target: cereal::cereal
find_package(CLI11 REQUIRED)         # target: CLI11::CLI11
find_package(SQLite3 REQUIRED)       # target: SQLite::SQLite3
find_package(nlohmann_json REQUIRED) # target: nlohmann_json::nlohmann_json
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

# The CUDA backend needs both a CUDA compiler and NCCL. Without them the build is CPU-only.
set(CPRR_HAVE_CUDA OFF)
if(NOT CPRR_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  if(CMAKE_CUDA_COMPILER AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # H100/H200, the GPU machine
    endif()
    enable_language(CUDA)
    # CMake 3.25 (Debian 12) predates nvcc's C++20 support: teach it the flag.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # fmt 9 turns its constexpr support off under nvcc yet keeps consteval format strings, which
    # nvcc then rejects in every CPRR_CHECK/CPRR_CUDA; g++ builds have it on, so .cu files match.
    add_compile_definitions($<$<COMPILE_LANGUAGE:CUDA>:FMT_USE_CONSTEXPR=1>)
    find_package(CUDAToolkit REQUIRED)
    # cudart is linked statically so binaries built here run on the GPU machine without carrying
    # it; NCCL is found there as libnccl.so.2 (../shared/design/DEVICE.md).
    add_library(cprr_nccl INTERFACE)
    target_include_directories(cprr_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(cprr_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart_static)
    set(CPRR_HAVE_CUDA ON)
    message(STATUS "cprr: CUDA backend enabled (nccl: ${NCCL_LIBRARY})")
  elseif(CPRR_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CPRR_CUDA=ON but nvcc or NCCL was not found (nvcc: '${CMAKE_CUDA_COMPILER}', nccl.h: '${NCCL_INCLUDE_DIR}', libnccl: '${NCCL_LIBRARY}')")
  else()
    message(STATUS "cprr: CUDA backend disabled (no nvcc or no NCCL); building CPU-only")
  endif()
endif()
