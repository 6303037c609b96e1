# Reducer tests (bucketed allreduce scheduler): exact integer-valued gradients, cross-rank
# mismatch detection, and equivalence with a single process on the concatenated batch.
ddp_add_test_exe(reducer_exact reducer_exact.c)
ddp_add_test_exe(reducer_mismatch reducer_mismatch.c)
foreach(np 1 2 3 4)
  ddp_add_mpi_test(NAME reducer_exact_np${np} EXE reducer_exact NP ${np} LABELS quick mpi TIMEOUT 90)
endforeach()
foreach(np 2 3)
  ddp_add_mpi_test(NAME reducer_mismatch_np${np} EXE reducer_mismatch NP ${np} LABELS quick mpi TIMEOUT 60)
endforeach()
