# Restarts (issue 17): apps/ddp_run, the launcher that runs a training command again after a
# failure with --resume auto, against a stand-in command (no MPI: the launcher's own logic).
ddp_add_mpi_test(NAME restart_launcher LABELS quick restart TIMEOUT 60
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/restart_launcher.sh ${PROJECT_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/restart_launcher)

# The checkpoint directory (apps/kit/ckpt_dir.c) on its own: names, LATEST, save order,
# pruning, resume order, bad folders.
ddp_add_test_exe(restart_dir restart_dir.c)
target_link_libraries(restart_dir PRIVATE ddp_kit)
ddp_add_mpi_test(NAME restart_dir PROGRAM restart_dir NP 0 ARGS ${CMAKE_CURRENT_BINARY_DIR}/restart_tmp
  LABELS quick restart)

# ddp_train interrupted and resumed by apps/ddp_run (tests/restart_check.sh MODE NP ...): the
# same final parameters and per-epoch metrics as the uninterrupted run; bad input.
if(TARGET ddp_train)
  function(ddp_add_restart_check mode np timeout)
    ddp_add_mpi_test(NAME restart_${mode}_np${np} LABELS restart mpi TIMEOUT ${timeout} SKIP_CODE 77
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/restart_check.sh ${mode} ${np} ${DDP_LAUNCH}
              ${PROJECT_SOURCE_DIR}/apps/ddp_run $<TARGET_FILE:ddp_train>
              ${CMAKE_CURRENT_BINARY_DIR}/restart_tmp/${mode}_np${np})
  endfunction()
  foreach(np 2 3)
    ddp_add_restart_check(kill ${np} 120)
    ddp_add_restart_check(usr1 ${np} 120)
    ddp_add_restart_check(corrupt ${np} 120)
  endforeach()
  ddp_add_restart_check(badinput 2 120)
  ddp_add_restart_check(fs 2 120)
endif()

# apps/slurm/train_requeue.sbatch on the private SLURM (ci/slurm/with_slurm.sh; 77 without
# slurm-wlm): stopped by SIGUSR1 to the batch shell, requeued, resumed, the same result.
# restart_slurm_np2 runs ddp_run with mpirun inside the job, restart_slurm_srun_np2 with srun.
if(TARGET ddp_train)
  foreach(launcher mpirun srun)
    set(name restart_slurm)
    if(launcher STREQUAL "srun")
      set(name restart_slurm_srun)
    endif()
    ddp_add_mpi_test(NAME ${name}_np2 LABELS restart slurm TIMEOUT 240 SKIP_CODE 77 RUN_SERIAL
      ENV MPIDDP_LAUNCHER=${launcher}
      COMMAND bash ${PROJECT_SOURCE_DIR}/ci/slurm/with_slurm.sh
              --scratch ${CMAKE_CURRENT_BINARY_DIR}/${name}_tmp --
              bash ${CMAKE_CURRENT_SOURCE_DIR}/restart_check.sh slurm 2 ${DDP_LAUNCH}
              ${PROJECT_SOURCE_DIR}/apps/ddp_run $<TARGET_FILE:ddp_train>
              ${CMAKE_CURRENT_BINARY_DIR}/restart_tmp/${name}_np2)
  endforeach()
endif()
