# Tests of ddp_train: model gradients, schedule and checkpoint format (unit), loss
# equivalence across world sizes, resume equality, refused checkpoints, accuracy after 1 epoch.
set(DDP_TRAIN_TMP ${CMAKE_CURRENT_BINARY_DIR}/train_tmp)
file(MAKE_DIRECTORY ${DDP_TRAIN_TMP})

ddp_add_test_exe(train_unit train_unit.c)
target_link_libraries(train_unit PRIVATE ddp_kit)
ddp_add_mpi_test(NAME train_unit PROGRAM train_unit NP 0 ARGS ${DDP_TRAIN_TMP}/unit
  ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/adamw_torch.txt LABELS quick train zero)

# Script-driven end-to-end checks: tests/train_check.sh MODE MPIEXEC DDP_TRAIN SCRATCH.
function(ddp_add_train_check name mode labels timeout)
  ddp_add_mpi_test(NAME ${name} LABELS ${labels} TIMEOUT ${timeout} SKIP_CODE 77
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_check.sh ${mode}
            ${DDP_LAUNCH} $<TARGET_FILE:ddp_train> ${DDP_TRAIN_TMP}/${mode})
endfunction()
if(TARGET ddp_train)
  ddp_add_train_check(train_equiv_np124 equiv "train;mpi" 120)
  ddp_add_train_check(train_determ_np124 determ "train;mpi" 120)
  ddp_add_train_check(train_resume_np2 resume "train;mpi" 120)
  ddp_add_train_check(train_ckpt_corrupt_np2 corrupt "train;mpi" 180)
  ddp_add_train_check(train_amp_np2 amp "train;mpi" 120)
  ddp_add_train_check(train_device_emulated_np2 device "train;mpi;emulate" 120)
  ddp_add_train_check(train_accuracy_np2 accuracy "train;mpi" 180)
endif()

# tools/plot: metrics CSV and allreduce_bench JSON to PNG with gnuplot (skips without gnuplot).
ddp_add_mpi_test(NAME train_plot LABELS quick train SKIP_CODE 77 COMMAND bash
  ${CMAKE_CURRENT_SOURCE_DIR}/train_plot.sh ${PROJECT_SOURCE_DIR} ${DDP_TRAIN_TMP}/plot)
