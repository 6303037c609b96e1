# SLURM tests: a private single-node SLURM (ci/slurm/with_slurm.sh: munged,
# slurmctld and slurmd as children of the test, stopped by pid) runs each CPU batch script of
# apps/slurm/ with sbatch --wait; the job output must show the ranks and the accuracy line.
# Skips (77) where slurm-wlm or munge is not installed.
if(TARGET ddp_train)
  ddp_add_mpi_test(NAME slurm_sbatch_np2 LABELS slurm TIMEOUT 240 SKIP_CODE 77 RUN_SERIAL
    COMMAND bash ${PROJECT_SOURCE_DIR}/ci/slurm/with_slurm.sh
            --scratch ${CMAKE_CURRENT_BINARY_DIR}/slurm_tmp --
            bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm_check.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} 2)
endif()
