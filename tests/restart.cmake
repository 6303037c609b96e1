# Restarts (issue 17): apps/ddp_run, the launcher that runs a training command again after a
# failure with --resume auto, against a stand-in command (no MPI: the launcher's own logic).
add_test(NAME restart_launcher
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/restart_launcher.sh ${PROJECT_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/restart_launcher)
set_tests_properties(restart_launcher PROPERTIES TIMEOUT 60 LABELS "quick;restart")
