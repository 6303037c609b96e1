# Reducer tests (bucketed allreduce scheduler): exact integer-valued gradients, cross-rank
# mismatch detection, and equivalence with a single process on the concatenated batch.
ddp_add_test_exe(reducer_exact reducer_exact.c)
ddp_add_test_exe(reducer_mismatch reducer_mismatch.c)
ddp_add_mpi_test(NAME reducer_exact PROGRAM reducer_exact NP 1 2 3 4 LABELS quick mpi TIMEOUT 90)
# ddp_reducer_grads (all gradient views at once) against ddp_reducer_grad(i), and its bad inputs.
ddp_add_test_exe(reducer_grads reducer_grads.c)
ddp_add_mpi_test(NAME reducer_grads PROGRAM reducer_grads NP 1 2 LABELS quick mpi)
ddp_add_mpi_test(NAME reducer_mismatch PROGRAM reducer_mismatch NP 2 3 LABELS quick mpi)
# The equivalence test trains the W-DDP model code (the kit's MLP, apps/kit) with OpenBLAS.
ddp_add_test_exe(reducer_equiv reducer_equiv.c)
target_link_libraries(reducer_equiv PRIVATE ddp_kit)
ddp_add_mpi_test(NAME reducer_equiv PROGRAM reducer_equiv NP 1 2 3 4 LABELS quick mpi TIMEOUT 120
  ENV OPENBLAS_NUM_THREADS=1)
# Timeline events and DDP_DEBUG=INFO statistics, through a short ddp_bench run.
if(TARGET ddp_bench)
  ddp_add_mpi_test(NAME reducer_timeline_np2 LABELS quick mpi COMMAND bash
    ${CMAKE_CURRENT_SOURCE_DIR}/reducer_timeline.sh ${DDP_LAUNCH} $<TARGET_FILE:ddp_bench> 2)
endif()
# Device-memory buckets through the public device API, under the host emulation.
ddp_add_test_exe(reducer_device reducer_device.c)
ddp_add_mpi_test(NAME reducer_device PROGRAM reducer_device NP 1 2 3 ARGS emulate
  LABELS emulate quick mpi TIMEOUT 120 ENV DDP_DEVICE_EMULATE=1)
# Two virtual nodes of two ranks: per-node pools, hierarchical allreduce across "nodes".
ddp_add_mpi_test(NAME reducer_exact_vnodes PROGRAM reducer_exact NP 4 LABELS quick mpi TIMEOUT 90
  ENV DDP_RANKS_PER_NODE=2)
if(TARGET reducer_equiv)
  ddp_add_mpi_test(NAME reducer_equiv_vnodes PROGRAM reducer_equiv NP 4 LABELS quick mpi TIMEOUT 120
    ENV DDP_RANKS_PER_NODE=2 OPENBLAS_NUM_THREADS=1)
endif()
# ddp_bench end to end on small layers: host (JSON written), and device buckets under emulation.
if(TARGET ddp_bench)
  ddp_add_mpi_test(NAME reducer_bench PROGRAM ddp_bench NP 2 LABELS quick mpi
    ARGS --layers 64,128,128,10 --steps 3 --warmup 1 --sweep -J ${CMAKE_CURRENT_BINARY_DIR}/reducer_bench.json
    ENV OPENBLAS_NUM_THREADS=1)
  ddp_add_mpi_test(NAME reducer_bench_device PROGRAM ddp_bench NP 2 LABELS emulate quick mpi
    ARGS --layers 64,128,128,10 --steps 3 --warmup 1 --device cuda --bucket-cap-mb 0.05
    ENV DDP_DEVICE_EMULATE=1 OPENBLAS_NUM_THREADS=1)
endif()
# Sharded reducer (ZeRO-1): reduce-scatter buckets, shard-only update, parameter allgather,
# bitwise equal to the allreduce reducer; misuses give a clear status.
ddp_add_test_exe(reducer_zero reducer_zero.c)
ddp_add_mpi_test(NAME reducer_zero PROGRAM reducer_zero NP 1 2 3 4 LABELS quick mpi zero TIMEOUT 90)
