# cprr_add_worker(<target> <sources...>): a worker executable holding the cases in <sources>, with
# the one-line main written for it. Cases register themselves statically, so they go into the
# executable itself, never into a static library the linker may drop them from.
function(cprr_add_worker target)
  set(_main ${CMAKE_CURRENT_BINARY_DIR}/${target}_worker_main.cpp)
  file(CONFIGURE OUTPUT ${_main} CONTENT
       "#include <cprr/worker.h>\n\nint main(int argc, char** argv) { return cprr::worker_main(argc, argv); }\n")
  add_executable(${target} ${ARGN} ${_main})
  target_link_libraries(${target} PRIVATE cprr::cases)
endfunction()
