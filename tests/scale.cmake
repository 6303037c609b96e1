# Simulated clusters (label scale; docs/scale.md): the library built with smpicc into the build
# tree (scale_build, a fixture) and a 64-rank simulation that checks every algorithm's result
# and auto's time against SMPI's own algorithms (scale_allreduce_64). Both skip (77) where
# SimGrid's smpicc is missing; ci/setup.sh installs it.
set(DDP_SCALE_DIR ${CMAKE_BINARY_DIR}/scale-smpi)
ddp_add_mpi_test(NAME scale_build LABELS scale TIMEOUT 900 SKIP_CODE 77 COMMAND bash
  ${CMAKE_CURRENT_SOURCE_DIR}/scale_check.sh build ${PROJECT_SOURCE_DIR} ${DDP_SCALE_DIR})
ddp_add_mpi_test(NAME scale_allreduce_64 LABELS scale TIMEOUT 150 SKIP_CODE 77 COMMAND bash
  ${CMAKE_CURRENT_SOURCE_DIR}/scale_check.sh run ${PROJECT_SOURCE_DIR} ${DDP_SCALE_DIR})
set_tests_properties(scale_build PROPERTIES FIXTURES_SETUP scale_smpi)
set_tests_properties(scale_allreduce_64 PROPERTIES FIXTURES_REQUIRED scale_smpi)
