# Foundation tests: communicator, configuration, logging, timeline, install, layering.
ddp_add_test_exe(comm_init comm_init.c)
ddp_add_test_exe(comm_adopt comm_adopt.c)
ddp_add_test_exe(timeline_prog timeline_prog.c)
ddp_add_mpi_test(NAME comm_init_singleton EXE comm_init NP 0 LABELS quick TIMEOUT 60)
foreach(np 1 2 3 4)
  ddp_add_mpi_test(NAME comm_init_np${np} EXE comm_init NP ${np} LABELS quick TIMEOUT 60)
endforeach()
ddp_add_mpi_test(NAME comm_virtual_nodes_np4 EXE comm_init NP 4 ARGS 2 LABELS quick TIMEOUT 60
  ENV DDP_RANKS_PER_NODE=2)
ddp_add_mpi_test(NAME comm_virtual_nodes_np3 EXE comm_init NP 3 ARGS 2 LABELS quick TIMEOUT 60
  ENV DDP_RANKS_PER_NODE=2)
ddp_add_mpi_test(NAME comm_adopt_np1 EXE comm_adopt NP 1 LABELS quick TIMEOUT 60)
ddp_add_mpi_test(NAME comm_adopt_np3 EXE comm_adopt NP 3 LABELS quick TIMEOUT 60)
add_test(NAME timeline_json_np2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/timeline_check.sh
  ${DDP_LAUNCH} $<TARGET_FILE:timeline_prog> 2)
set_tests_properties(timeline_json_np2 PROPERTIES TIMEOUT 60 LABELS quick ENVIRONMENT "${DDP_TEST_ENV}")
add_test(NAME install_np2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_check.sh
  ${PROJECT_BINARY_DIR} ${DDP_LAUNCH} ${MPI_C_COMPILER})
set_tests_properties(install_np2 PROPERTIES TIMEOUT 180 LABELS install ENVIRONMENT "${DDP_TEST_ENV}")

# EBUSY: a pending request or a live reducer keeps the communicator alive on every rank.
ddp_add_test_exe(comm_busy comm_busy.c)
ddp_add_mpi_test(NAME comm_busy_np1 EXE comm_busy NP 1 LABELS quick TIMEOUT 60)
ddp_add_mpi_test(NAME comm_busy_np3 EXE comm_busy NP 3 LABELS quick TIMEOUT 60)

# The layers look down (ci/check-layers.sh on this build), and the check refuses a planted
# upward include and a planted upward call.
add_test(NAME check_layers COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.sh
  ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER})
set_tests_properties(check_layers PROPERTIES TIMEOUT 60 LABELS quick)
