# Collectives tests (prefix coll_): allreduce algorithms x dtypes x ops x counts, the other
# collectives, non-blocking requests in flight, the shared pool, bad inputs.
ddp_add_test_exe(coll_allreduce coll_allreduce.c)
ddp_add_test_exe(coll_api coll_api.c)
foreach(np 1 2 3 4)
  ddp_add_mpi_test(NAME coll_allreduce_np${np} EXE coll_allreduce NP ${np} ARGS all quick host
    LABELS quick TIMEOUT 120)
  ddp_add_mpi_test(NAME coll_api_np${np} EXE coll_api NP ${np} LABELS quick TIMEOUT 120)
endforeach()
# The benchmark itself, small: every algorithm, checked results, JSON written (exit 1 if wrong).
add_test(NAME coll_bench_smoke_np2 COMMAND ${DDP_MPIEXEC} ${DDP_MPIRUN_FLAGS} -np 2
  $<TARGET_FILE:allreduce_bench> -b 8 -e 256K -f 8 -n 3 -w 1 -J ${CMAKE_CURRENT_BINARY_DIR}/coll_bench_smoke.json)
set_tests_properties(coll_bench_smoke_np2 PROPERTIES TIMEOUT 60 LABELS quick ENVIRONMENT "${DDP_TEST_ENV}")
add_test(NAME coll_bench_shared_np3 COMMAND ${DDP_MPIEXEC} ${DDP_MPIRUN_FLAGS} -np 3
  $<TARGET_FILE:allreduce_bench> -b 4 -e 1M -f 16 -n 2 -w 1 -M shared -d bf16 -o avg)
set_tests_properties(coll_bench_shared_np3 PROPERTIES TIMEOUT 60 LABELS quick ENVIRONMENT "${DDP_TEST_ENV}")
foreach(c broadcast allgather reducescatter)
  add_test(NAME coll_bench_${c}_np2 COMMAND ${DDP_MPIEXEC} ${DDP_MPIRUN_FLAGS} -np 2
    $<TARGET_FILE:allreduce_bench> -C ${c} -b 8 -e 1M -f 16 -n 2 -w 1 -d i32)
  set_tests_properties(coll_bench_${c}_np2 PROPERTIES TIMEOUT 60 LABELS quick ENVIRONMENT "${DDP_TEST_ENV}")
endforeach()
