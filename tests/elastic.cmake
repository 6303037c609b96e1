# Elastic continuation at another world size (issue 28, label `elastic`): the batch plan and
# the ZeRO shard read-back (unit, no MPI).
ddp_add_test_exe(elastic_unit elastic_unit.c)
target_link_libraries(elastic_unit PRIVATE ddp_kit)
ddp_add_mpi_test(NAME elastic_unit PROGRAM elastic_unit NP 0 LABELS quick elastic TIMEOUT 30)

# ddp_train resumed at another world size: 2 -> 1, 2 -> 3, 4 -> 2 with --zero 0 and 1 end with
# the uninterrupted run's parameter CRC (--deterministic); a batch that cannot split is refused.
if(TARGET ddp_train AND EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  ddp_add_mpi_test(NAME elastic_resume LABELS elastic train mpi TIMEOUT 150 SKIP_CODE 77
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/elastic_check.sh ${DDP_LAUNCH} $<TARGET_FILE:ddp_train>
            ${CMAKE_CURRENT_BINARY_DIR}/elastic_tmp/resume)
endif()

# apps/ddp_run --elastic with a stand-in job (no MPI): shrink, grow, flag rewriting, give-up.
ddp_add_mpi_test(NAME elastic_launcher LABELS quick elastic TIMEOUT 60
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/elastic_launcher.sh ${PROJECT_SOURCE_DIR}/apps/ddp_run
          ${CMAKE_CURRENT_BINARY_DIR}/elastic_tmp/launcher)
