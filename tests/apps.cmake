# Checks of the training kit (apps/kit) that the programs expose.
# app_opts.h: the programs' option parser on good and bad command lines (no MPI, < 1 s).
add_executable(app_opts_unit ${CMAKE_CURRENT_SOURCE_DIR}/app_opts_unit.c)
target_link_libraries(app_opts_unit PRIVATE ddp_kit)
ddp_add_mpi_test(NAME app_opts_unit PROGRAM app_opts_unit NP 0 LABELS quick TIMEOUT 10)

# app_blas.h: the OpenBLAS kernel check before MPI_Init, through ddp_info under the launcher.
if(TARGET ddp_info)
  ddp_add_mpi_test(NAME app_blas_np2 LABELS quick mpi COMMAND bash
    ${CMAKE_CURRENT_SOURCE_DIR}/app_blas.sh $<TARGET_FILE:ddp_info> bash ${DDP_LAUNCH})
endif()

# tools/plot/timeline.py and plot.sh timeline on a real ddp_bench trace (merged and per rank).
if(TARGET ddp_bench)
  ddp_add_mpi_test(NAME timeline_plot_np2 LABELS quick mpi COMMAND bash
    ${CMAKE_CURRENT_SOURCE_DIR}/timeline_plot.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:ddp_bench>
    ${CMAKE_CURRENT_BINARY_DIR}/timeline_plot bash ${DDP_LAUNCH})
endif()
