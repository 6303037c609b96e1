# Foundation tests: communicator, configuration, logging, timeline, install, layering.
ddp_add_test_exe(comm_init comm_init.c)
ddp_add_test_exe(comm_adopt comm_adopt.c)
ddp_add_test_exe(timeline_prog timeline_prog.c)
ddp_add_mpi_test(NAME comm_init_singleton PROGRAM comm_init NP 0 LABELS quick)
ddp_add_mpi_test(NAME comm_init PROGRAM comm_init NP 1 2 3 4 LABELS quick)
ddp_add_mpi_test(NAME comm_virtual_nodes PROGRAM comm_init NP 4 3 ARGS 2 LABELS quick
  ENV DDP_RANKS_PER_NODE=2)
ddp_add_mpi_test(NAME comm_adopt PROGRAM comm_adopt NP 1 3 LABELS quick)
ddp_add_mpi_test(NAME timeline_json_np2 LABELS quick COMMAND bash
  ${CMAKE_CURRENT_SOURCE_DIR}/timeline_check.sh ${DDP_LAUNCH} $<TARGET_FILE:timeline_prog> 2)
ddp_add_mpi_test(NAME install_np2 LABELS install TIMEOUT 180 COMMAND bash
  ${CMAKE_CURRENT_SOURCE_DIR}/install_check.sh ${PROJECT_BINARY_DIR} ${DDP_LAUNCH} ${MPI_C_COMPILER})

# EBUSY: a pending request or a live reducer keeps the communicator alive on every rank.
ddp_add_test_exe(comm_busy comm_busy.c)
ddp_add_mpi_test(NAME comm_busy PROGRAM comm_busy NP 1 3 LABELS quick)

# The layers look down (ci/check-layers.sh on this build), and the check refuses a planted
# upward include and a planted upward call.
ddp_add_mpi_test(NAME check_layers LABELS quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.sh
  ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER})
# No function of the programs or the kit over 100 lines (ci/check-size.sh; warnings only for
# now), and the check names a planted 101-line function and nothing else.
ddp_add_mpi_test(NAME check_size LABELS quick TIMEOUT 30 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_size.sh
  ${PROJECT_SOURCE_DIR} ${CMAKE_C_COMPILER})

# The docs' measured results: every bench/results/*.md page is what render.py makes of its JSON
# (so a table cannot drift from its data), and every relative link and #anchor of README.md,
# docs/*.md and bench/results/*.md resolves. Python standard library only, well under a second.
find_program(DDP_DOCS_PYTHON3 NAMES python3)
if(NOT DDP_DOCS_PYTHON3)
  set(DDP_DOCS_PYTHON3 python3)
endif()
ddp_add_mpi_test(NAME bench_results_rendered LABELS quick TIMEOUT 30 COMMAND ${DDP_DOCS_PYTHON3}
  ${PROJECT_SOURCE_DIR}/bench/results/render.py --check)
ddp_add_mpi_test(NAME docs_links LABELS quick TIMEOUT 30 COMMAND ${DDP_DOCS_PYTHON3}
  ${PROJECT_SOURCE_DIR}/docs/check_links.py ${PROJECT_SOURCE_DIR})
