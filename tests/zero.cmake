# ddp_train --zero (ZeRO-1/2 with the kit's SGD and AdamW): tests/zero_check.sh MODE NP LAUNCH
# DDP_TRAIN SCRATCH. The optimizer and checkpoint units are in train_unit, the reducer's
# sharded mode in reducer_zero (tests/reducer.cmake); all carry the label zero.
set(DDP_ZERO_TMP ${CMAKE_CURRENT_BINARY_DIR}/zero_tmp)
file(MAKE_DIRECTORY ${DDP_ZERO_TMP})
if(TARGET ddp_train)
  foreach(np 1 2 4)
    ddp_add_mpi_test(NAME zero_determ_np${np} LABELS "train;mpi;zero" TIMEOUT 180
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/zero_check.sh determ ${np} ${DDP_LAUNCH}
              $<TARGET_FILE:ddp_train> ${DDP_ZERO_TMP}/determ${np})
  endforeach()
  ddp_add_mpi_test(NAME zero_reducer_np2 LABELS "train;mpi;zero" TIMEOUT 120
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/zero_check.sh reducer 2 ${DDP_LAUNCH}
            $<TARGET_FILE:ddp_train> ${DDP_ZERO_TMP}/reducer)
  ddp_add_mpi_test(NAME zero_resume_np2 LABELS "train;mpi;zero" TIMEOUT 180
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/zero_check.sh resume 2 ${DDP_LAUNCH}
            $<TARGET_FILE:ddp_train> ${DDP_ZERO_TMP}/resume)
endif()
