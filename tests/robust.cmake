# Robustness tests: watchdog, collective fingerprints, failure handling (kill, abort),
# soak. The fuzz targets are in tests/fuzz.cmake.

# A failure scenario run through tests/robust_run.sh, which checks the exit status, the wall
# time (MAXS) and the messages (CHECKS: --want ERE, --once ERE, --not ERE).
function(ddp_add_robust_test)
  cmake_parse_arguments(T "" "NAME;EXE;NP;TIMEOUT;EXPECT;MAXS" "ARGS;LABELS;ENV;CHECKS" ${ARGN})
  ddp_launch_args(launch NP ${T_NP} ENV ${T_ENV})
  add_test(NAME ${T_NAME} COMMAND bash ${PROJECT_SOURCE_DIR}/tests/robust_run.sh
           --expect ${T_EXPECT} --max-s ${T_MAXS} ${T_CHECKS} --
           ${launch} $<TARGET_FILE:${T_EXE}> ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    ENVIRONMENT "${DDP_TEST_ENV};${T_ENV}" SKIP_RETURN_CODE 77)
endfunction()

# ---- guard internals: fingerprints and deadlines -------------------------------------------
ddp_add_internal_test_exe(guard_unit guard_unit.c)
foreach(np 2 3)
  ddp_add_mpi_test(NAME guard_unit_np${np} EXE guard_unit NP ${np} LABELS quick robust TIMEOUT 60
    ENV DDP_CHECK=1 DDP_ON_TIMEOUT=return DDP_TIMEOUT_S=10)
endforeach()

# ---- failure scenarios under mpirun ------------------------------------------------------------
ddp_add_internal_test_exe(robust_prog robust_prog.c)
ddp_add_robust_test(NAME robust_wait_abort_np2 EXE robust_prog NP 2 ARGS wait_abort
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_TIMELINE=${CMAKE_CURRENT_BINARY_DIR}/robust_wait_abort.json
  CHECKS --file ${CMAKE_CURRENT_BINARY_DIR}/robust_wait_abort.json.rank0 "\"watchdog timeout\".*\"seq\":3,\"collective\":\"allreduce\",\"bytes\":4096,\"tag\":2,\"peers\":\"1\""
         --once "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo ring, 4096 bytes, tag/bucket 2\\). peers that had not answered: 1$"
         --not "the watchdog did not abort")
ddp_add_robust_test(NAME robust_fp_skip_np3 EXE robust_prog NP 3 ARGS fp_skip
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_CHECK=1
  CHECKS --want "mpiddp ABORT: watchdog: timeout .* waiting for collective #12 fingerprint of allreduce .*peers that had not answered: 1$"
         --not "expected an abort")
ddp_add_robust_test(NAME robust_abort_np3 EXE robust_prog NP 3 ARGS abort
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust
  CHECKS --once "mpiddp ABORT: robust test: deliberate ddp_abort from rank 1$"
         --not "ddp_abort returned")
ddp_add_robust_test(NAME robust_kill_np3 EXE robust_prog NP 3 ARGS kill
  EXPECT fail MAXS 30 TIMEOUT 90 LABELS quick robust
  CHECKS --want "rank 1 raises SIGKILL" --not "finished the loop")
# DDP_CHECK=1 on rank 0 only (the program sets it there before ddp_init): every rank's
# ddp_init fails, nobody hangs.
ddp_add_robust_test(NAME robust_check_disagree_np3 EXE robust_prog NP 3 ARGS check_disagree
  EXPECT ok MAXS 20 TIMEOUT 60 LABELS quick robust
  CHECKS --want "DDP_CHECK=1\\): ddp_init returned -?[0-9]+: .*DDP_CHECK differs across ranks.* -> PASS"
         --want "DDP_CHECK=unset\\): ddp_init returned -?[0-9]+: .*DDP_CHECK differs across ranks.* -> PASS"
         --not "-> FAIL")
ddp_add_robust_test(NAME robust_ok_np3 EXE robust_prog NP 3 ARGS ok
  EXPECT ok MAXS 30 TIMEOUT 60 LABELS quick robust
  CHECKS --want "robust_prog ok: PASS")

# ---- the same through the public collectives -----------------------------------------------
ddp_add_test_exe(robust_coll robust_coll.c)
foreach(np 2 3)
  ddp_add_mpi_test(NAME robust_mismatch_np${np} EXE robust_coll NP ${np} ARGS mismatch
    LABELS quick robust TIMEOUT 60 ENV DDP_CHECK=1 DDP_TIMEOUT_S=20)
endforeach()
ddp_add_robust_test(NAME robust_coll_hang_abort_np3 EXE robust_coll NP 3 ARGS hang_abort
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust ENV DDP_TIMEOUT_S=2
  CHECKS --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo [a-z]+, 131072 bytes, tag/bucket 7\\). peers that had not answered: (0,)?1(,2)? \\(stall inspector: (rank 0 [^;]*. )?rank 1 did not answer within 1.0 s \\(busy outside mpiddp, stalled or dead\\)"
         --not "completed although")
# Both sides time out and inspect; whichever aborts first is the one whose report is sure to
# be printed, so either view is accepted.
ddp_add_robust_test(NAME robust_coll_desync_np3 EXE robust_coll NP 3 ARGS desync
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust ENV DDP_TIMEOUT_S=2
  CHECKS --want "mpiddp ABORT: watchdog: .* waiting for collective #3 (allreduce .*peers that had not answered: 1 \\(stall inspector: rank 1 waits in collective #3 broadcast \\(131072 bytes\\)|broadcast .*peers that had not answered: 0,2 \\(stall inspector: rank 0 waits in collective #3 allreduce \\(131072 bytes\\))"
         --not "completed although")
ddp_add_robust_test(NAME robust_coll_hang_check_np3 EXE robust_coll NP 3 ARGS hang_abort
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_CHECK=1
  CHECKS --want "mpiddp ABORT: watchdog: timeout .* waiting for collective #3 fingerprint of allreduce .*peers that had not answered: 1$"
         --not "completed although")
ddp_add_robust_test(NAME robust_coll_hang_return_np3 EXE robust_coll NP 3 ARGS hang_return
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_ON_TIMEOUT=return
  CHECKS --want "ddp_wait returned .*timed out.*: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce"
         --want "mpiddp ABORT: robust_coll: rank [02] gives up after DDP_ETIMEDOUT$"
         --not "completed although")
# DDP_ON_TIMEOUT=return and then a normal ddp_finalize on every rank: the abandoned collective
# (shared-memory allreduce; a pending MPI broadcast) must not hang the shutdown.
foreach(v "" _bcast)
  ddp_add_robust_test(NAME robust_coll_hang_finalize${v}_np3 EXE robust_coll NP 3 ARGS hang_finalize${v}
    EXPECT ok MAXS 25 TIMEOUT 60 LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_ON_TIMEOUT=return
    CHECKS --want "rank 0: ddp_wait returned timed out: watchdog: timeout after [0-9.]+ s"
           --want "rank 0 finalizes" --want "rank 1 finalizes")
endforeach()
ddp_add_robust_test(NAME robust_coll_kill_np4 EXE robust_coll NP 4 ARGS kill
  EXPECT fail MAXS 30 TIMEOUT 90 LABELS quick robust
  CHECKS --want "rank 1 raises SIGKILL at iteration 300" --not "finished the loop|wrong result")
ddp_add_robust_test(NAME robust_coll_stall_np4 EXE robust_coll NP 4 ARGS stall
  EXPECT fail MAXS 30 TIMEOUT 90 LABELS quick robust ENV DDP_TIMEOUT_S=3
  CHECKS --want "rank 1 raises SIGSTOP at iteration 300"
         --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=3\\) waiting for collective #301 .*peers that had not answered: (0,)?1[ ,]"
         --not "finished the loop|wrong result")
ddp_add_robust_test(NAME robust_coll_ok_np4 EXE robust_coll NP 4 ARGS ok
  EXPECT ok MAXS 60 TIMEOUT 90 LABELS quick robust
  CHECKS --want "robust_coll ok: PASS")

# ---- soak: 20,000 random non-blocking collectives at np 4, exact results, flat RSS ----------
ddp_add_test_exe(soak soak.c)
ddp_add_mpi_test(NAME soak_np4 EXE soak NP 4 ARGS 20000 16 12345 LABELS slow robust TIMEOUT 600)
# A short run of the same program for the quick set (and ASan).
ddp_add_mpi_test(NAME soak_short_np3 EXE soak NP 3 ARGS 1000 8 777 LABELS quick robust TIMEOUT 120)

# ---- SIGKILL of a rank during ddp_train (from outside, as the OOM killer would) ------------
# ddp_train reads Fashion-MNIST (Debian's dataset-fashion-mnist); without it these two cannot run.
if(TARGET ddp_train AND EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  ddp_launch_args(launch NP 3)
  add_test(NAME robust_kill_train_np3 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/robust_kill_train.sh
    30 "^epoch +train_loss" -- ${launch} $<TARGET_FILE:ddp_train>
    --epochs 1000 --limit-steps 200 --limit-test 50 --no-progress)
  set_tests_properties(robust_kill_train_np3 PROPERTIES TIMEOUT 150 LABELS "quick;robust"
    ENVIRONMENT "${DDP_TEST_ENV}" SKIP_RETURN_CODE 77)
  # A rank that hangs (SIGSTOP) instead of dying: mpirun sees nothing, the watchdog ends it.
  ddp_launch_args(launch NP 3 ENV DDP_TIMEOUT_S=4)
  add_test(NAME robust_stall_train_np3 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/robust_kill_train.sh
    30 "^epoch +train_loss" STOP "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=4\\) waiting for collective #[0-9]+ .*peers that had not answered: [0-9]"
    -- ${launch} $<TARGET_FILE:ddp_train>
    --epochs 1000 --limit-steps 200 --limit-test 50 --no-progress)
  set_tests_properties(robust_stall_train_np3 PROPERTIES TIMEOUT 150 LABELS "quick;robust"
    ENVIRONMENT "${DDP_TEST_ENV};DDP_TIMEOUT_S=4" SKIP_RETURN_CODE 77)
endif()

# ---- cost of DDP_CHECK=1 (the README's table: `robust_fpcost 7 fpcost.json` at np 2) ---------
ddp_add_test_exe(robust_fpcost robust_fpcost.c)
ddp_add_mpi_test(NAME robust_fpcost_smoke_np2 EXE robust_fpcost NP 2 ARGS 1 LABELS quick robust
  TIMEOUT 60)
# An 8-byte allreduce on the mpi algorithm (the MPI library's blocking MPI_Allreduce under the
# watch thread) that one rank skips: it ends in the watchdog's report, not a hang, and the
# watch thread of the ranks blocked in MPI_Allreduce answers the stall inspector ("wait in the
# same collective").
ddp_add_robust_test(NAME robust_coll_hang_small_np3 EXE robust_coll NP 3 ARGS hang_abort
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_ALLREDUCE_ALGO=mpi ROBUST_HANG_COUNT=2
  CHECKS --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo mpi, 8 bytes, tag/bucket 7\\)"
         --not "completed although")
# Rank 2 enters 1.5 s late: when rank 0's deadline expires (2 s) rank 2 has waited 0.5 s
# inside MPI_Allreduce, and only its watch thread can tell rank 0's stall inspector so; the
# job ends (rank 0's abort, ~3 s) before rank 2's own deadline.
ddp_add_robust_test(NAME robust_coll_hang_watch_np3 EXE robust_coll NP 3 ARGS hang_abort
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_ALLREDUCE_ALGO=mpi ROBUST_HANG_COUNT=2 ROBUST_LATE_MS=1500
  CHECKS --want ":[0-9]+:0 mpiddp ABORT: watchdog: .* \\(algo mpi, 8 bytes, tag/bucket 7\\). peers that had not answered: 1 \\(stall inspector: rank 1 did not answer within 1.0 s \\(busy outside mpiddp, stalled or dead\\). 1 other rank\\(s\\) wait in the same collective\\)"
         --not "completed although")
# The same with DDP_ON_TIMEOUT=return: the mpi algorithm then posts MPI_Iallreduce and waits
# through the watchdog, so the call returns DDP_ETIMEDOUT.
ddp_add_robust_test(NAME robust_coll_hang_small_return_np3 EXE robust_coll NP 3 ARGS hang_return
  EXPECT fail MAXS 15 TIMEOUT 60 LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_ON_TIMEOUT=return DDP_ALLREDUCE_ALGO=mpi ROBUST_HANG_COUNT=2
  CHECKS --want "ddp_wait returned .*timed out.*: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo mpi, 8 bytes"
         --want "mpiddp ABORT: robust_coll: rank [02] gives up after DDP_ETIMEDOUT$"
         --not "completed although")
