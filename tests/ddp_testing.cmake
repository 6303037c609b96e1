# Helpers every tests/<area>.cmake uses. Every MPI job starts through tools/mpilaunch, the one
# place that knows the flags of Open MPI's mpirun, Hydra's mpiexec (MPICH, Intel MPI) and srun;
# it runs the launcher CMake matched to the MPI library (cmake/DDPLaunch.cmake) and gives
# every rank DDP_WORLD_SIZE, so a job whose MPI world differs fails in ddp_init.
#   ddp_add_test_exe(<exe> <sources...>)          builds a test program linked to mpiddp
#   ddp_add_internal_test_exe(<exe> <sources...>) the same, linked to mpiddp_static (internals)
#   ddp_add_mpi_test(NAME n EXE e NP np [ARGS ...] [LABELS ...] [TIMEOUT s] [ENV K=V ...])
#     registers `mpilaunch -n np -e K... e args` (NP 0: an MPI singleton without a launcher,
#     with DDP_WORLD_SIZE=1); EXE is any executable target (tests or apps).
#   ddp_launch_args(<out> NP np [ENV K=V ...])   the launcher words of such a test, for a
#     test whose command wraps the job (a checking script before the launcher).
#   DDP_LAUNCH                                     tools/mpilaunch, for the test scripts
#     (`"$launch" -n 2 -e NAME=VALUE prog args`); DDP_TEST_ENV configures it.
set(DDP_LAUNCH ${PROJECT_SOURCE_DIR}/tools/mpilaunch)
set(DDP_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONDONTWRITEBYTECODE=1)
if(MPIEXEC_EXECUTABLE)
  list(APPEND DDP_TEST_ENV MPILAUNCH_MPIEXEC=${MPIEXEC_EXECUTABLE})
endif()
if(NOT DDP_LAUNCHER_KIND STREQUAL "unknown")
  list(APPEND DDP_TEST_ENV MPILAUNCH_KIND=${DDP_LAUNCHER_KIND})
endif()
# The ranks inherit the launcher's environment on this node (every launcher passes it).
if(DDP_SANITIZE STREQUAL "address,undefined")
  set(DDP_LSAN_SUPP ${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp)
  list(APPEND DDP_TEST_ENV
    "ASAN_OPTIONS=fast_unwind_on_malloc=0:detect_leaks=1:abort_on_error=0"
    "LSAN_OPTIONS=fast_unwind_on_malloc=0:suppressions=${DDP_LSAN_SUPP}:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    OMPI_MCA_mca_base_component_disable_dlclose=1)
endif()

function(ddp_add_test_exe exe)
  add_executable(${exe} ${ARGN})
  target_link_libraries(${exe} PRIVATE mpiddp m)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common ${DDP_HEADER_DIRS})
endfunction()

# Programs that drive internal (ddp__, hidden) interfaces link the static library.
function(ddp_add_internal_test_exe exe)
  add_executable(${exe} ${ARGN})
  target_link_libraries(${exe} PRIVATE mpiddp_static m)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common ${DDP_HEADER_DIRS})
endfunction()

function(ddp_launch_args out)
  cmake_parse_arguments(L "" "NP" "ENV" ${ARGN})
  set(words bash ${DDP_LAUNCH} -n ${L_NP})
  foreach(kv ${L_ENV})
    string(REGEX REPLACE "=.*" "" k "${kv}")
    list(APPEND words -e ${k})
  endforeach()
  set(${out} ${words} PARENT_SCOPE)
endfunction()

function(ddp_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;EXE;NP;TIMEOUT" "ARGS;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  set(env ${DDP_TEST_ENV} ${T_ENV})
  if(T_NP EQUAL 0)
    add_test(NAME ${T_NAME} COMMAND $<TARGET_FILE:${T_EXE}> ${T_ARGS})
    list(APPEND env DDP_WORLD_SIZE=1)
  else()
    ddp_launch_args(launch NP ${T_NP} ENV ${T_ENV})
    add_test(NAME ${T_NAME} COMMAND ${launch} $<TARGET_FILE:${T_EXE}> ${T_ARGS})
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    ENVIRONMENT "${env}" SKIP_RETURN_CODE 77)
endfunction()
