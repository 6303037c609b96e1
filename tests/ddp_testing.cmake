# Helpers every tests/<area>.cmake uses.
#   ddp_add_test_exe(<exe> <sources...>)          builds a test program linked to mpiddp
#   ddp_add_internal_test_exe(<exe> <sources...>) the same, linked to mpiddp_static (internals)
#   ddp_add_mpi_test(NAME n EXE e NP np [ARGS ...] [LABELS ...] [TIMEOUT s] [ENV K=V ...])
#     registers `mpirun -np np e args` (NP 0: run as an MPI singleton, without mpirun).
set(DDP_MPIEXEC ${MPIEXEC_EXECUTABLE})
set(DDP_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1 PYTHONDONTWRITEBYTECODE=1)
set(DDP_MPIRUN_FLAGS --oversubscribe --bind-to none)
if(DDP_SANITIZE STREQUAL "address,undefined")
  set(DDP_LSAN_SUPP ${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp)
  list(APPEND DDP_TEST_ENV
    "ASAN_OPTIONS=fast_unwind_on_malloc=0:detect_leaks=1:abort_on_error=0"
    "LSAN_OPTIONS=fast_unwind_on_malloc=0:suppressions=${DDP_LSAN_SUPP}:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    OMPI_MCA_mca_base_component_disable_dlclose=1)
  list(APPEND DDP_MPIRUN_FLAGS -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS
    -x OMPI_MCA_mca_base_component_disable_dlclose)
endif()

function(ddp_add_test_exe exe)
  add_executable(${exe} ${ARGN})
  target_link_libraries(${exe} PRIVATE mpiddp m)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common
    ${PROJECT_SOURCE_DIR}/runtime ${PROJECT_SOURCE_DIR}/collectives ${PROJECT_SOURCE_DIR}/samplers)
endfunction()

# Programs that drive internal (ddp__, hidden) interfaces link the static library.
function(ddp_add_internal_test_exe exe)
  add_executable(${exe} ${ARGN})
  target_link_libraries(${exe} PRIVATE mpiddp_static m)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common
    ${PROJECT_SOURCE_DIR}/runtime ${PROJECT_SOURCE_DIR}/collectives ${PROJECT_SOURCE_DIR}/samplers)
endfunction()

function(ddp_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;EXE;NP;TIMEOUT" "ARGS;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(T_NP EQUAL 0)
    add_test(NAME ${T_NAME} COMMAND $<TARGET_FILE:${T_EXE}> ${T_ARGS})
  else()
    set(envflags "")
    foreach(kv ${T_ENV})
      string(REGEX REPLACE "=.*" "" k "${kv}")
      list(APPEND envflags -x ${k})
    endforeach()
    add_test(NAME ${T_NAME} COMMAND ${DDP_MPIEXEC} ${DDP_MPIRUN_FLAGS} ${envflags} -np ${T_NP}
             $<TARGET_FILE:${T_EXE}> ${T_ARGS})
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    ENVIRONMENT "${DDP_TEST_ENV};${T_ENV}" SKIP_RETURN_CODE 77)
endfunction()
