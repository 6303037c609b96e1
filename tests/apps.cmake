# Checks of the training kit (apps/kit) that the programs expose.
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
