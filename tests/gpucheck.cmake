# CPU dry run of ci/gpu-check.sh (label gpucheck): the carry folder (gpucarry/ or a fixture from
# the installed packages), unpacking into a private prefix with this machine's MPI hidden, the
# MPI checks, configure, the summary and the archive; broken carry folders must fail.
ddp_add_mpi_test(NAME gpucheck_dry LABELS gpucheck TIMEOUT 300 RUN_SERIAL COMMAND bash
  ${CMAKE_CURRENT_SOURCE_DIR}/gpucheck_dry.sh ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpucheck)
