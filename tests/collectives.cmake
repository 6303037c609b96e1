# Collectives tests (prefix coll_): allreduce algorithms x dtypes x ops x counts, the other
# collectives, non-blocking requests in flight, the shared pool, bad inputs.
ddp_add_test_exe(coll_allreduce coll_allreduce.c)
ddp_add_test_exe(coll_api coll_api.c)
foreach(np 1 2 3 4)
  ddp_add_mpi_test(NAME coll_allreduce_np${np} EXE coll_allreduce NP ${np} ARGS all quick host
    LABELS quick TIMEOUT 120)
  ddp_add_mpi_test(NAME coll_api_np${np} EXE coll_api NP ${np} LABELS quick TIMEOUT 120)
endforeach()
