# The installed package, end to end, as a user meets it (cmake -P; tests/CMakeLists.txt passes the
# variables): install this build into an empty prefix, build examples/ against that prefix alone
# (find_package), run its worker through the installed cprecord on the CPU backend and check that
# every example case was recorded and passed. Also builds a worker with cprr_add_worker.
#   BUILD_DIR  the cprr build tree     SOURCE_DIR  cprr's source tree
#   WORK_DIR   scratch (emptied)       GENERATOR, CXX_COMPILER  as the cprr build used
cmake_minimum_required(VERSION 3.25)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# Nothing but the prefix tells the consumers where cprr is.
set(configure_args -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
                   -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run("configuring examples/" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/examples
    ${configure_args})
file(STRINGS ${WORK_DIR}/examples/CMakeCache.txt found REGEX "^cprr_DIR:")
if(NOT found STREQUAL "cprr_DIR:PATH=${prefix}/lib/cmake/cprr")
  message(FATAL_ERROR "examples/ found cprr elsewhere than the prefix: ${found}")
endif()
run("building examples/" ${CMAKE_COMMAND} --build ${WORK_DIR}/examples -j2)

run("configuring the cprr_add_worker project" ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/add_worker
    -B ${WORK_DIR}/add_worker ${configure_args})
run("building the cprr_add_worker project" ${CMAKE_COMMAND} --build ${WORK_DIR}/add_worker -j2)

# The example's cases, fresh and pooled: each passes, and the race planted in the one pipeline
# without its event (two native kernels on two streams) is named.
run("cprecord on examples/" ${prefix}/bin/cprecord --worker ${WORK_DIR}/examples/my_cases
    --backend cpu --mode both --db ${WORK_DIR}/examples.db --json)
set(names example/gradient_average example/parameter_broadcast example/overlapped_buckets
          example/own_functor example/native_pipeline example/native_pipeline_race)
string(JSON n LENGTH "${out}" cases)
if(n EQUAL 0)
  message(FATAL_ERROR "the example worker's run recorded no case:\n${out}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${out}" cases ${i} name)
  string(JSON label GET "${out}" cases ${i} label)
  string(JSON status GET "${out}" cases ${i} status)
  string(JSON verdict GET "${out}" cases ${i} verdict)
  string(JSON runs LENGTH "${out}" cases ${i} executions)
  if(NOT name IN_LIST names)
    message(FATAL_ERROR "unexpected case ${label} in the example worker's run")
  endif()
  set(want_verdict "")  # JSON null
  if(name STREQUAL "example/native_pipeline_race")
    set(want_verdict "stream_race")
    string(JSON between GET "${out}" cases ${i} race detail)
    if(NOT between MATCHES "native 'square_x'.*native 'square_x2'.*'x2'")
      message(FATAL_ERROR "${label}: the race is not the one between the native kernels: ${between}")
    endif()
  endif()
  if(NOT status STREQUAL "pass" OR NOT runs EQUAL 2 OR NOT verdict STREQUAL want_verdict)
    message(FATAL_ERROR "${label}: ${status}, verdict ${verdict} (${runs} executions)\n${out}")
  endif()
  list(APPEND seen ${name})
endforeach()
foreach(name ${names})
  if(NOT name IN_LIST seen)
    message(FATAL_ERROR "${name} was not recorded:\n${out}")
  endif()
endforeach()
message(STATUS "examples/: ${n} cases passed, fresh and pooled")

run("cprecord on the cprr_add_worker worker" ${prefix}/bin/cprecord
    --worker ${WORK_DIR}/add_worker/added_worker --backend cpu --mode pool
    --db ${WORK_DIR}/add_worker.db --json)
string(JSON name GET "${out}" cases 0 name)
string(JSON status GET "${out}" cases 0 status)
if(NOT name STREQUAL "install_test/sum" OR NOT status STREQUAL "pass")
  message(FATAL_ERROR "cprr_add_worker's worker: ${name} ${status}\n${out}")
endif()
