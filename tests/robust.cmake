# Robustness tests: watchdog, collective fingerprints, failure handling (kill, abort),
# soak. The fuzz targets are in tests/fuzz.cmake.

# A failure scenario runs under tests/robust_run.sh (WRAP ${DDP_ROBUST_RUN} ... --), which
# checks the exit status (--expect ok|fail), the wall time (--max-s) and the messages
# (--want ERE, --once ERE, --not ERE, --file FILE ERE).
set(DDP_ROBUST_RUN bash ${PROJECT_SOURCE_DIR}/tests/robust_run.sh)

# ---- guard internals: fingerprints and deadlines -------------------------------------------
ddp_add_internal_test_exe(guard_unit guard_unit.c)
ddp_add_mpi_test(NAME guard_unit PROGRAM guard_unit NP 2 3 LABELS quick robust
  ENV DDP_CHECK=1 DDP_ON_TIMEOUT=return DDP_TIMEOUT_S=10)

# ---- failure scenarios under mpirun ------------------------------------------------------------
ddp_add_internal_test_exe(robust_prog robust_prog.c)
ddp_add_mpi_test(NAME robust_wait_abort PROGRAM robust_prog NP 2 CASES wait_abort
  LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_TIMELINE=${CMAKE_CURRENT_BINARY_DIR}/robust_wait_abort.json
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --file ${CMAKE_CURRENT_BINARY_DIR}/robust_wait_abort.json.rank0 "\"watchdog timeout\".*\"seq\":3,\"collective\":\"allreduce\",\"bytes\":4096,\"tag\":2,\"peers\":\"1\""
    --once "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo ring, 4096 bytes, tag/bucket 2\\). peers that had not answered: 1$"
    --not "the watchdog did not abort" --)
ddp_add_mpi_test(NAME robust_fp_skip PROGRAM robust_prog NP 3 CASES fp_skip
  LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_CHECK=1
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "mpiddp ABORT: watchdog: timeout .* waiting for collective #12 fingerprint of allreduce .*peers that had not answered: 1$"
    --not "expected an abort" --)
ddp_add_mpi_test(NAME robust_abort PROGRAM robust_prog NP 3 CASES abort
  LABELS quick robust
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --once "mpiddp ABORT: robust test: deliberate ddp_abort from rank 1$"
    --not "ddp_abort returned" --)
ddp_add_mpi_test(NAME robust_kill PROGRAM robust_prog NP 3 CASES kill
  TIMEOUT 90 LABELS quick robust
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 30
    --want "rank 1 raises SIGKILL" --not "finished the loop" --)
# DDP_CHECK=1 on rank 0 only (the program sets it there before ddp_init): every rank's
# ddp_init fails, nobody hangs.
ddp_add_mpi_test(NAME robust_check_disagree PROGRAM robust_prog NP 3 CASES check_disagree
  LABELS quick robust
  WRAP ${DDP_ROBUST_RUN} --expect ok --max-s 20
    --want "DDP_CHECK=1\\): ddp_init returned -?[0-9]+: .*DDP_CHECK differs across ranks.* -> PASS"
    --want "DDP_CHECK=unset\\): ddp_init returned -?[0-9]+: .*DDP_CHECK differs across ranks.* -> PASS"
    --not "-> FAIL" --)
ddp_add_mpi_test(NAME robust_ok PROGRAM robust_prog NP 3 CASES ok
  LABELS quick robust
  WRAP ${DDP_ROBUST_RUN} --expect ok --max-s 30
    --want "robust_prog ok: PASS" --)

# ---- the same through the public collectives -----------------------------------------------
ddp_add_test_exe(robust_coll robust_coll.c)
ddp_add_mpi_test(NAME robust_mismatch PROGRAM robust_coll NP 2 3 CASES mismatch LABELS quick robust
  ENV DDP_CHECK=1 DDP_TIMEOUT_S=20)
ddp_add_mpi_test(NAME robust_coll_hang_abort PROGRAM robust_coll NP 3 CASES hang_abort
  LABELS quick robust ENV DDP_TIMEOUT_S=2
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo [a-z]+, 131072 bytes, tag/bucket 7\\). peers that had not answered: (0,)?1(,2)? \\(stall inspector: (rank 0 [^;]*. )?rank 1 did not answer within 1.0 s \\(busy outside mpiddp, stalled or dead\\)"
    --not "completed although" --)
# Both sides time out and inspect; whichever aborts first is the one whose report is sure to
# be printed, so either view is accepted.
ddp_add_mpi_test(NAME robust_coll_desync PROGRAM robust_coll NP 3 CASES desync
  LABELS quick robust ENV DDP_TIMEOUT_S=2
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "mpiddp ABORT: watchdog: .* waiting for collective #3 (allreduce .*peers that had not answered: 1 \\(stall inspector: rank 1 waits in collective #3 broadcast \\(131072 bytes\\)|broadcast .*peers that had not answered: 0,2 \\(stall inspector: rank 0 waits in collective #3 allreduce \\(131072 bytes\\))"
    --not "completed although" --)
ddp_add_mpi_test(NAME robust_coll_hang_check PROGRAM robust_coll NP 3 CASES hang_abort
  LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_CHECK=1
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "mpiddp ABORT: watchdog: timeout .* waiting for collective #3 fingerprint of allreduce .*peers that had not answered: 1$"
    --not "completed although" --)
ddp_add_mpi_test(NAME robust_coll_hang_return PROGRAM robust_coll NP 3 CASES hang_return
  LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_ON_TIMEOUT=return
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "ddp_wait returned .*timed out.*: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce"
    --want "mpiddp ABORT: robust_coll: rank [02] gives up after DDP_ETIMEDOUT$"
    --not "completed although" --)
# DDP_ON_TIMEOUT=return and then a normal ddp_finalize on every rank: the abandoned collective
# (shared-memory allreduce; a pending MPI broadcast) must not hang the shutdown.
foreach(v "" _bcast)
  ddp_add_mpi_test(NAME robust_coll_hang_finalize${v} PROGRAM robust_coll NP 3 CASES hang_finalize${v}
  LABELS quick robust ENV DDP_TIMEOUT_S=2 DDP_ON_TIMEOUT=return
  WRAP ${DDP_ROBUST_RUN} --expect ok --max-s 25
    --want "rank 0: ddp_wait returned timed out: watchdog: timeout after [0-9.]+ s"
    --want "rank 0 finalizes" --want "rank 1 finalizes" --)
endforeach()
ddp_add_mpi_test(NAME robust_coll_kill PROGRAM robust_coll NP 4 CASES kill
  TIMEOUT 90 LABELS quick robust
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 30
    --want "rank 1 raises SIGKILL at iteration 300" --not "finished the loop|wrong result" --)
ddp_add_mpi_test(NAME robust_coll_stall PROGRAM robust_coll NP 4 CASES stall
  TIMEOUT 90 LABELS quick robust ENV DDP_TIMEOUT_S=3
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 30
    --want "rank 1 raises SIGSTOP at iteration 300"
    --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=3\\) waiting for collective #301 .*peers that had not answered: (0,)?1[ ,]"
    --not "finished the loop|wrong result" --)
ddp_add_mpi_test(NAME robust_coll_ok PROGRAM robust_coll NP 4 CASES ok
  TIMEOUT 90 LABELS quick robust
  WRAP ${DDP_ROBUST_RUN} --expect ok --max-s 60
    --want "robust_coll ok: PASS" --)

# ---- soak: 20,000 random non-blocking collectives at np 4, exact results, flat RSS ----------
ddp_add_test_exe(soak soak.c)
ddp_add_mpi_test(NAME soak PROGRAM soak NP 4 ARGS 20000 16 12345 LABELS slow robust TIMEOUT 600)
# A short run of the same program for the quick set (and ASan).
ddp_add_mpi_test(NAME soak_short PROGRAM soak NP 3 ARGS 1000 8 777 LABELS quick robust TIMEOUT 120)

# ---- SIGKILL of a rank during ddp_train (from outside, as the OOM killer would) ------------
# ddp_train reads Fashion-MNIST (Debian's dataset-fashion-mnist); without it these two cannot run.
if(TARGET ddp_train AND EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  ddp_add_mpi_test(NAME robust_kill_train PROGRAM ddp_train NP 3 TIMEOUT 150 LABELS quick robust
    WRAP bash ${CMAKE_CURRENT_SOURCE_DIR}/robust_kill_train.sh 30 "^epoch +train_loss" --
    ARGS --epochs 1000 --limit-steps 200 --limit-test 50 --no-progress)
  # A rank that hangs (SIGSTOP) instead of dying: mpirun sees nothing, the watchdog ends it.
  ddp_add_mpi_test(NAME robust_stall_train PROGRAM ddp_train NP 3 TIMEOUT 150 LABELS quick robust
    ENV DDP_TIMEOUT_S=4
    WRAP bash ${CMAKE_CURRENT_SOURCE_DIR}/robust_kill_train.sh 30 "^epoch +train_loss" STOP
      "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=4\\) waiting for collective #[0-9]+ .*peers that had not answered: [0-9]" --
    ARGS --epochs 1000 --limit-steps 200 --limit-test 50 --no-progress)
endif()

# ---- cost of DDP_CHECK=1 (the README's table: `robust_fpcost 7 fpcost.json` at np 2) ---------
ddp_add_test_exe(robust_fpcost robust_fpcost.c)
ddp_add_mpi_test(NAME robust_fpcost_smoke PROGRAM robust_fpcost NP 2 ARGS 1 LABELS quick robust)
# An 8-byte allreduce on the mpi algorithm (the MPI library's blocking MPI_Allreduce under the
# watch thread) that one rank skips: it ends in the watchdog's report, not a hang, and the
# watch thread of the ranks blocked in MPI_Allreduce answers the stall inspector ("wait in the
# same collective").
ddp_add_mpi_test(NAME robust_coll_hang_small PROGRAM robust_coll NP 3 CASES hang_abort
  LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_ALLREDUCE_ALGO=mpi ROBUST_HANG_COUNT=2
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo mpi, 8 bytes, tag/bucket 7\\)"
    --not "completed although" --)
# Rank 2 enters 1.5 s late: when rank 0's deadline expires (2 s) rank 2 has waited 0.5 s
# inside MPI_Allreduce, and only its watch thread can tell rank 0's stall inspector so; the
# job ends (rank 0's abort, ~3 s) before rank 2's own deadline.
ddp_add_mpi_test(NAME robust_coll_hang_watch PROGRAM robust_coll NP 3 CASES hang_abort
  LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_ALLREDUCE_ALGO=mpi ROBUST_HANG_COUNT=2 ROBUST_LATE_MS=1500
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want ":[0-9]+:0 mpiddp ABORT: watchdog: .* \\(algo mpi, 8 bytes, tag/bucket 7\\). peers that had not answered: 1 \\(stall inspector: rank 1 did not answer within 1.0 s \\(busy outside mpiddp, stalled or dead\\). 1 other rank\\(s\\) wait in the same collective\\)"
    --not "completed although" --)
# The same with DDP_ON_TIMEOUT=return: the mpi algorithm then posts MPI_Iallreduce and waits
# through the watchdog, so the call returns DDP_ETIMEDOUT.
ddp_add_mpi_test(NAME robust_coll_hang_small_return PROGRAM robust_coll NP 3 CASES hang_return
  LABELS quick robust
  ENV DDP_TIMEOUT_S=2 DDP_ON_TIMEOUT=return DDP_ALLREDUCE_ALGO=mpi ROBUST_HANG_COUNT=2
  WRAP ${DDP_ROBUST_RUN} --expect fail --max-s 15
    --want "ddp_wait returned .*timed out.*: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=2\\) waiting for collective #3 allreduce \\(algo mpi, 8 bytes"
    --want "mpiddp ABORT: robust_coll: rank [02] gives up after DDP_ETIMEDOUT$"
    --not "completed although" --)
