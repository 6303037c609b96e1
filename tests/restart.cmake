# Restarts (issue 17): apps/ddp_run, the launcher that runs a training command again after a
# failure with --resume auto, against a stand-in command (no MPI: the launcher's own logic).
ddp_add_mpi_test(NAME restart_launcher LABELS quick restart TIMEOUT 60
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/restart_launcher.sh ${PROJECT_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/restart_launcher)
