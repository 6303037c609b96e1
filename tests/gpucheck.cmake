# CPU dry run of ci/gpu-check.sh (label gpucheck): the carry folder (gpucarry/ or a fixture from
# the installed packages), unpacking into a private prefix with this machine's MPI hidden, the
# MPI checks, configure, the summary and the archive; broken carry folders must fail.
add_test(NAME gpucheck_dry COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpucheck_dry.sh
         ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpucheck)
set_tests_properties(gpucheck_dry PROPERTIES TIMEOUT 300 LABELS gpucheck RUN_SERIAL TRUE
  ENVIRONMENT "${DDP_TEST_ENV}")
