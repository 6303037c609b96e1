# Collectives tests (prefix coll_): allreduce algorithms x dtypes x ops x counts x in/out of
# place, the other collectives, non-blocking requests in flight, the shared pool, bad inputs,
# algorithm forcing, hier on virtual nodes, and the benchmark itself.
ddp_add_test_exe(coll_allreduce coll_allreduce.c)
ddp_add_test_exe(coll_api coll_api.c)
# The host kernels are hidden in the library: this unit test compiles them in.
ddp_add_test_exe(coll_kernels coll_kernels.c ${PROJECT_SOURCE_DIR}/collectives/kernels/coll_reduce.c)
ddp_add_mpi_test(NAME coll_kernels PROGRAM coll_kernels NP 0 LABELS quick)
ddp_add_mpi_test(NAME coll_allreduce PROGRAM coll_allreduce NP 1 2 3 4 ARGS all quick host
  LABELS quick TIMEOUT 120)
ddp_add_mpi_test(NAME coll_api PROGRAM coll_api NP 1 2 3 4 LABELS quick TIMEOUT 120)
# Buffers from the node-shared pool (zero-copy shm), and a mix of pool and malloc peers.
ddp_add_mpi_test(NAME coll_allreduce_pool PROGRAM coll_allreduce NP 2 ARGS all quick pool
  LABELS quick TIMEOUT 120)
ddp_add_mpi_test(NAME coll_allreduce_mixed PROGRAM coll_allreduce NP 3 ARGS shm,hier,auto quick mixed
  LABELS quick TIMEOUT 120)
# hier across virtual nodes of 2 ranks; np 3 has unequal nodes (hier must refuse clearly).
ddp_add_mpi_test(NAME coll_allreduce_hier_vnodes PROGRAM coll_allreduce NP 4 ARGS all quick mixed
  LABELS quick TIMEOUT 120 ENV DDP_RANKS_PER_NODE=2)
ddp_add_mpi_test(NAME coll_allreduce_hier_vnodes PROGRAM coll_allreduce NP 3 ARGS hier,shm,auto quick host
  LABELS quick TIMEOUT 120 ENV DDP_RANKS_PER_NODE=2)
# hier's point-to-point node path (DDP_SHM=0: no node-shared memory), virtual nodes of 2:
# unpipelined (the default 16 MB chunks exceed the quick counts), and pipelined in 16-byte
# chunks (DDP_HIER_PIPELINE=16: up to 8 chunks even at 1031 elements; counts below
# chunks x ranks get fewer chunks), every dtype/op, odd counts, in and out of place.
ddp_add_mpi_test(NAME coll_allreduce_hier_p2p PROGRAM coll_allreduce NP 4 ARGS hier,auto,shm quick host
  LABELS quick TIMEOUT 120 ENV DDP_RANKS_PER_NODE=2 DDP_SHM=0)
ddp_add_mpi_test(NAME coll_allreduce_hier_pipe PROGRAM coll_allreduce NP 4 8 ARGS hier quick host
  LABELS quick TIMEOUT 120 ENV DDP_RANKS_PER_NODE=2 DDP_SHM=0 DDP_HIER_PIPELINE=16)
# DDP_ALLREDUCE_ALGO forcing: auto runs as the forced algorithm; an inapplicable one is refused
# with the usable names; an unknown one fails ddp_init with the valid names.
ddp_add_mpi_test(NAME coll_allreduce_forced_ring PROGRAM coll_allreduce NP 3 ARGS auto quick host
  LABELS quick TIMEOUT 120 ENV DDP_ALLREDUCE_ALGO=ring)
ddp_add_mpi_test(NAME coll_allreduce_forced_shm_vnodes PROGRAM coll_allreduce NP 2 ARGS auto quick host
  LABELS quick TIMEOUT 120 ENV DDP_ALLREDUCE_ALGO=shm DDP_RANKS_PER_NODE=1)
ddp_add_mpi_test(NAME coll_api_badenv PROGRAM coll_api NP 2 CASES badenv LABELS quick
  ENV DDP_ALLREDUCE_ALGO=bogus)
# Every collective also passes the DDP_CHECK=1 fingerprint exchange (on the engine thread).
ddp_add_mpi_test(NAME coll_allreduce_check PROGRAM coll_allreduce NP 3 ARGS all quick mixed
  LABELS quick TIMEOUT 120 ENV DDP_CHECK=1)
ddp_add_mpi_test(NAME coll_api_check PROGRAM coll_api NP 2 LABELS quick TIMEOUT 120 ENV DDP_CHECK=1)
# Large counts (1000003 and 4M elements) and more ranks. "full": every algorithm x dtype x op
# x count {0, 1, p-1, p, p+1, 1031, 100003, 1000003} x in/out of place, and 4M on every dtype
# with sum and on f32 with every op; "big": the large counts on f32 sum/avg only.
ddp_add_mpi_test(NAME coll_allreduce_full PROGRAM coll_allreduce NP 1 ARGS all full host
  LABELS slow TIMEOUT 600)
ddp_add_mpi_test(NAME coll_allreduce_full PROGRAM coll_allreduce NP 2 ARGS all full pool
  LABELS slow TIMEOUT 600)
ddp_add_mpi_test(NAME coll_allreduce_full PROGRAM coll_allreduce NP 4 ARGS all full host
  LABELS slow TIMEOUT 900)
ddp_add_mpi_test(NAME coll_allreduce_big PROGRAM coll_allreduce NP 3 ARGS all big host
  LABELS slow TIMEOUT 300)
# Counts above INT_MAX (about 2.2 GB per rank).
ddp_add_test_exe(coll_bigcount coll_bigcount.c)
ddp_add_mpi_test(NAME coll_bigcount PROGRAM coll_bigcount NP 2 LABELS slow TIMEOUT 600)
ddp_add_mpi_test(NAME coll_allreduce_ring_rhd PROGRAM coll_allreduce NP 5 8 ARGS ring,rhd,shm quick host
  LABELS slow TIMEOUT 300)
# The benchmark itself, small: every algorithm, checked results, JSON written (exit 1 if wrong).
ddp_add_mpi_test(NAME coll_bench_smoke PROGRAM allreduce_bench NP 2 LABELS quick
  ARGS -b 8 -e 256K -f 8 -n 3 -w 1 -J ${CMAKE_CURRENT_BINARY_DIR}/coll_bench_smoke.json)
ddp_add_mpi_test(NAME coll_bench_shared PROGRAM allreduce_bench NP 3 LABELS quick
  ARGS -b 4 -e 1M -f 16 -n 2 -w 1 -M shared -d bf16 -o avg -P in)
foreach(c broadcast allgather reducescatter)
  ddp_add_mpi_test(NAME coll_bench_${c} PROGRAM allreduce_bench NP 2 LABELS quick
    ARGS -C ${c} -b 8 -e 1M -f 16 -n 2 -w 1 -d i32)
endforeach()

# Device transports side by side (-M cuda -A staged,mpi,nccl) on the emulated device: every
# result checked; transports that cannot run here (nccl without NCCL or on the emulation) are
# skipped with their reason. The bench's exit status counts (a transport that fails at any size
# fails the test), and staged, mpi and staged:ring must each have run. The bench's own failure
# line is matched, not any "failed": Open MPI 5.0.11 prints "Error: OSC UCX component priority
# set inside component query failed" at start-up on machines without a UCX device.
ddp_add_mpi_test(NAME coll_bench_cuda_emulated PROGRAM allreduce_bench NP 2 LABELS quick emulate
  SKIP_CODE 0
  WRAP bash ${CMAKE_CURRENT_SOURCE_DIR}/robust_run.sh --expect ok --max-s 50
    --want "^# algorithm: staged$" --want "^# algorithm: mpi$"
    --want "^# algorithm: staged:ring$" --want "^# Out of bounds values : 0 OK$"
    --not "^# skipping (staged|mpi)" --not "WRONG|[(]failed: see stderr[)]|wrong: [1-9]|no device on this communicator" --
  ARGS -M cuda -A staged,mpi,nccl,staged:ring -b 8 -e 1M -f 16 -n 3 -w 1
  ENV DDP_DEVICE_EMULATE=1)
