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
# The equivalence test trains the W-DDP model code (apps/common/mlp.h) with OpenBLAS.
find_library(DDP_OPENBLAS_LIB NAMES openblas)
find_path(DDP_CBLAS_INCLUDE NAMES cblas.h PATH_SUFFIXES openblas-pthread openblas)
if(DDP_OPENBLAS_LIB AND DDP_CBLAS_INCLUDE)
  ddp_add_test_exe(reducer_equiv reducer_equiv.c)
  target_link_libraries(reducer_equiv PRIVATE ${DDP_OPENBLAS_LIB})
  target_include_directories(reducer_equiv PRIVATE ${DDP_CBLAS_INCLUDE} ${PROJECT_SOURCE_DIR}/apps/common)
  foreach(np 1 2 3 4)
    ddp_add_mpi_test(NAME reducer_equiv_np${np} EXE reducer_equiv NP ${np} LABELS quick mpi TIMEOUT 120
      ENV OPENBLAS_NUM_THREADS=1)
  endforeach()
endif()
# Timeline events and DDP_DEBUG=INFO statistics, through a short ddp_bench run.
if(TARGET ddp_bench)
  add_test(NAME reducer_timeline_np2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/reducer_timeline.sh
    ${DDP_LAUNCH} $<TARGET_FILE:ddp_bench> 2)
  set_tests_properties(reducer_timeline_np2 PROPERTIES TIMEOUT 60 LABELS "quick;mpi" ENVIRONMENT "${DDP_TEST_ENV}")
endif()
# Device-memory buckets through the public device API, under the host emulation.
ddp_add_test_exe(reducer_device reducer_device.c)
foreach(np 1 2 3)
  ddp_add_mpi_test(NAME reducer_device_np${np} EXE reducer_device NP ${np} ARGS emulate
    LABELS "emulate;quick;mpi" TIMEOUT 120 ENV DDP_DEVICE_EMULATE=1)
endforeach()
# Two virtual nodes of two ranks: per-node pools, hierarchical allreduce across "nodes".
ddp_add_mpi_test(NAME reducer_exact_vnodes_np4 EXE reducer_exact NP 4 LABELS quick mpi TIMEOUT 90
  ENV DDP_RANKS_PER_NODE=2)
if(TARGET reducer_equiv)
  ddp_add_mpi_test(NAME reducer_equiv_vnodes_np4 EXE reducer_equiv NP 4 LABELS quick mpi TIMEOUT 120
    ENV DDP_RANKS_PER_NODE=2 OPENBLAS_NUM_THREADS=1)
endif()
# ddp_bench end to end on small layers: host (JSON written), and device buckets under emulation.
if(TARGET ddp_bench)
  ddp_add_mpi_test(NAME reducer_bench_np2 EXE ddp_bench NP 2 LABELS quick mpi TIMEOUT 60
    ARGS --layers 64,128,128,10 --steps 3 --warmup 1 --sweep -J ${CMAKE_CURRENT_BINARY_DIR}/reducer_bench.json
    ENV OPENBLAS_NUM_THREADS=1)
  ddp_add_mpi_test(NAME reducer_bench_device_np2 EXE ddp_bench NP 2 LABELS "emulate;quick;mpi" TIMEOUT 60
    ARGS --layers 64,128,128,10 --steps 3 --warmup 1 --device cuda --bucket-cap-mb 0.05
    ENV DDP_DEVICE_EMULATE=1 OPENBLAS_NUM_THREADS=1)
endif()
# Sharded reducer (ZeRO-1): reduce-scatter buckets, shard-only update, parameter allgather,
# bitwise equal to the allreduce reducer; misuses give a clear status.
ddp_add_test_exe(reducer_zero reducer_zero.c)
foreach(np 1 2 3 4)
  ddp_add_mpi_test(NAME reducer_zero_np${np} EXE reducer_zero NP ${np} LABELS quick mpi zero TIMEOUT 90)
endforeach()
