# How tests are built and registered (docs/testing.md). Every MPI job starts through
# tools/mpilaunch, the one place that knows the flags of Open MPI's mpirun, Hydra's mpiexec
# (MPICH, Intel MPI) and srun; it runs the launcher CMake matched to the MPI library
# (cmake/DDPLaunch.cmake) and gives every rank DDP_WORLD_SIZE, so a job whose MPI world differs
# fails in ddp_init.
#   ddp_add_test_exe(<exe> <sources...>)          a test program linked to mpiddp and the
#     harness (tests/common: CHECK, the shared main() that runs the DDP_TEST_PROGRAM cases,
#     the typed buffers); a program with its own main() keeps it
#   ddp_add_internal_test_exe(<exe> <sources...>) the same, linked to mpiddp_static (internals)
#   ddp_add_mpi_test(...)                          registers every test, see below
#   DDP_LAUNCH                                     tools/mpilaunch, for the test scripts
#     (`"$launch" -n 2 -e NAME=VALUE prog args`); DDP_TEST_ENV configures it.
set(DDP_LAUNCH ${PROJECT_SOURCE_DIR}/tools/mpilaunch)
set(DDP_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONDONTWRITEBYTECODE=1)
if(MPIEXEC_EXECUTABLE)
  list(APPEND DDP_TEST_ENV MPILAUNCH_MPIEXEC=${MPIEXEC_EXECUTABLE})
endif()
# The interpreter of the tests against PyTorch (sampler_vs_torch, gpt_vs_torch_*): the package's
# DDP_PYTHON (python/CMakeLists.txt looks in /usr/bin first, whose python3 has Debian's torch;
# another python3 may come first on PATH), plain python3 without one.
if(DDP_PYTHON)
  set(DDP_SYSTEM_PYTHON3 ${DDP_PYTHON})
else()
  set(DDP_SYSTEM_PYTHON3 python3)
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

# The harness (tests/common): checks, the shared main(), typed buffers. It does not link the
# library itself, so that a test of internals links the static one alone.
add_library(ddp_test_common STATIC ${CMAKE_CURRENT_SOURCE_DIR}/common/ddp_test.c
  ${CMAKE_CURRENT_SOURCE_DIR}/common/ddp_test_main.c ${CMAKE_CURRENT_SOURCE_DIR}/common/ddp_test_typed.c)
target_include_directories(ddp_test_common PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/common
  ${DDP_HEADER_DIRS} ${PROJECT_SOURCE_DIR}/runtime ${PROJECT_BINARY_DIR}/include)
target_link_libraries(ddp_test_common PUBLIC MPI::MPI_C m)

function(ddp_add_test_exe exe)
  add_executable(${exe} ${ARGN})
  target_link_libraries(${exe} PRIVATE ddp_test_common mpiddp m)
  target_include_directories(${exe} PRIVATE ${DDP_HEADER_DIRS})
endfunction()

# Programs that drive internal (ddp__, hidden) interfaces link the static library.
function(ddp_add_internal_test_exe exe)
  add_executable(${exe} ${ARGN})
  target_link_libraries(${exe} PRIVATE ddp_test_common mpiddp_static m)
  target_include_directories(${exe} PRIVATE ${DDP_HEADER_DIRS})
endfunction()

# ddp_add_mpi_test(NAME name
#     PROGRAM target [CASES case...] [NP n...] [ARGS arg...] [WRAP word... --]
#   | COMMAND word...
#   [LABELS label...] [TIMEOUT s] [ENV NAME=VALUE...] [SKIP_CODE code] [RUN_SERIAL])
# PROGRAM: an executable target (a test program or an app) run as an MPI job of each rank
#   count in NP (default 1): test NAME_np<n> runs `mpilaunch -n n -e NAME... program
#   [--case a,b] args`; NP 0 is one MPI singleton without a launcher, test NAME. Every rank
#   gets MPIDDP_TEST_NP=n, the count the harness checks MPI's world against. CASES: the
#   harness cases to run (default: all of the program's). WRAP: a checking command in front
#   of the launcher (tests/robust_run.sh ... --, a script that kills a rank ...).
# COMMAND: a script that starts its own jobs through ${DDP_LAUNCH} (or none), test NAME.
# Every test: TIMEOUT (default 60 s), LABELS, ENV for the test and every rank (and
# DDP_TEST_ENV), SKIP_CODE (the exit status that means "cannot run here, said why": 77, the
# default for PROGRAM tests; a COMMAND test has one only when given; 0: none), RUN_SERIAL.
function(ddp_add_mpi_test)
  cmake_parse_arguments(T "RUN_SERIAL" "NAME;PROGRAM;TIMEOUT;SKIP_CODE"
    "CASES;NP;ARGS;WRAP;COMMAND;LABELS;ENV" ${ARGN})
  if(T_UNPARSED_ARGUMENTS OR NOT T_NAME OR (T_PROGRAM AND T_COMMAND) OR NOT (T_PROGRAM OR T_COMMAND))
    message(FATAL_ERROR "ddp_add_mpi_test(${T_NAME}): needs NAME and one of PROGRAM or COMMAND "
      "(unparsed: ${T_UNPARSED_ARGUMENTS})")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(NOT DEFINED T_SKIP_CODE AND T_PROGRAM)
    set(T_SKIP_CODE 77)
  endif()
  if(T_COMMAND)
    if(T_NP OR T_CASES OR T_ARGS OR T_WRAP)
      message(FATAL_ERROR "ddp_add_mpi_test(${T_NAME}): NP, CASES, ARGS and WRAP go with PROGRAM")
    endif()
    add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
    set(names ${T_NAME})
    set(envs "${DDP_TEST_ENV};${T_ENV}")
  else()
    if("${T_NP}" STREQUAL "")
      set(T_NP 1)
    endif()
    set(case_args "")
    if(T_CASES)
      string(REPLACE ";" "," cases "${T_CASES}")
      set(case_args --case ${cases})
    endif()
    set(names "")
    foreach(np ${T_NP})
      if(np EQUAL 0)
        set(name ${T_NAME})
        add_test(NAME ${name} COMMAND ${T_WRAP} $<TARGET_FILE:${T_PROGRAM}> ${case_args} ${T_ARGS})
        set(env_${name} "${DDP_TEST_ENV};${T_ENV};DDP_WORLD_SIZE=1;MPIDDP_TEST_NP=1")
      else()
        set(name ${T_NAME}_np${np})
        set(launch bash ${DDP_LAUNCH} -n ${np})
        foreach(kv ${T_ENV} MPIDDP_TEST_NP=${np})
          string(REGEX REPLACE "=.*" "" k "${kv}")
          list(APPEND launch -e ${k})
        endforeach()
        add_test(NAME ${name} COMMAND ${T_WRAP} ${launch} $<TARGET_FILE:${T_PROGRAM}> ${case_args} ${T_ARGS})
        set(env_${name} "${DDP_TEST_ENV};${T_ENV};MPIDDP_TEST_NP=${np}")
      endif()
      list(APPEND names ${name})
    endforeach()
  endif()
  foreach(name ${names})
    if(T_COMMAND)
      set(env "${envs}")
    else()
      set(env "${env_${name}}")
    endif()
    list(REMOVE_ITEM env "")
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
      ENVIRONMENT "${env}")
    if(T_SKIP_CODE)
      set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${T_SKIP_CODE})
    endif()
    if(T_RUN_SERIAL)
      set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endfunction()
