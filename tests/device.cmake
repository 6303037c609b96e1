# Device layer and device-memory collectives: under the host emulation (label emulate, in CI)
# and on a real GPU (label gpu: exits 77 with the reason where there is none).
ddp_add_test_exe(device_emu device_emu.c)
ddp_add_mpi_test(NAME device_emu PROGRAM device_emu NP 1 LABELS emulate quick
  ENV DDP_DEVICE_EMULATE=1)
ddp_add_mpi_test(NAME device_none PROGRAM device_emu NP 1 ARGS none LABELS emulate quick)
ddp_add_test_exe(device_coll device_coll.c)
ddp_add_mpi_test(NAME device_coll PROGRAM device_coll NP 2 LABELS emulate quick TIMEOUT 120
  ENV DDP_DEVICE_EMULATE=1 DDP_STAGING_CHUNK=4K)
ddp_add_mpi_test(NAME device_coll PROGRAM device_coll NP 3 LABELS emulate quick TIMEOUT 120
  ENV DDP_DEVICE_EMULATE=1 DDP_STAGING_CHUNK=4K DDP_STAGING_DEPTH=2)
ddp_add_mpi_test(NAME device_coll PROGRAM device_coll NP 1 LABELS emulate quick TIMEOUT 120
  ENV DDP_DEVICE_EMULATE=1 DDP_STAGING_CHUNK=4K DDP_STAGING_DEPTH=4)
# Real-GPU versions of the same programs (exit 77 with the reason when there is no GPU).
ddp_add_test_exe(gpu_device device_emu.c)
target_compile_definitions(gpu_device PRIVATE DDP_TEST_GPU=1)
ddp_add_test_exe(gpu_coll device_coll.c)
target_compile_definitions(gpu_coll PRIVATE DDP_TEST_GPU=1)
ddp_add_mpi_test(NAME gpu_device PROGRAM gpu_device NP 1 LABELS gpu TIMEOUT 120)
ddp_add_mpi_test(NAME gpu_coll PROGRAM gpu_coll NP 1 2 LABELS gpu TIMEOUT 300
  ENV DDP_STAGING_CHUNK=4K)
# Benchmark harness: a smoke run on the emulation (every result checked), the real one on a GPU.
ddp_add_test_exe(gpu_bench gpu_bench.c)
ddp_add_mpi_test(NAME gpu_bench_emulated PROGRAM gpu_bench NP 2
  ARGS --emulate -b 8 -e 1048576 -f 16 -n 3 -A staged,mpi,nccl LABELS emulate quick
  ENV DDP_DEVICE_EMULATE=1)
ddp_add_mpi_test(NAME gpu_bench PROGRAM gpu_bench NP 1 ARGS -e 67108864 -n 5 LABELS gpu TIMEOUT 300)
ddp_add_mpi_test(NAME device_coll_timeout PROGRAM device_coll NP 1 ARGS timeout LABELS emulate quick
  ENV DDP_DEVICE_EMULATE=1 DDP_TIMEOUT_S=1 DDP_ON_TIMEOUT=return DDP_DEBUG=NONE)

# The CUDA backend, the GPU probe and the NCCL transport compiled against the fake CUDA runtime
# and NCCL of tests/fake_cuda and run without a GPU (tests/cuda_fake.c): the thread's last CUDA
# error, two ranks on one GPU, sticky NCCL failures, NCCL under the watchdog, the in-place
# reduce-scatter offset rule. The fake replaces these three files of the static library.
ddp_add_internal_test_exe(cuda_fake cuda_fake.c fake_cuda/fake_cuda.c
  ${PROJECT_SOURCE_DIR}/runtime/device/device_cuda.c ${PROJECT_SOURCE_DIR}/runtime/device/device_probe.c
  ${PROJECT_SOURCE_DIR}/collectives/devcoll/coll_nccl.c)
target_compile_definitions(cuda_fake PRIVATE DDP_CUDA_FAKE=1)
target_include_directories(cuda_fake BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fake_cuda)
ddp_add_mpi_test(NAME cuda_fake PROGRAM cuda_fake NP 2 LABELS emulate quick TIMEOUT 90
  ENV DDP_DEVICE_EMULATE=1 DDP_ON_TIMEOUT=return DDP_TIMEOUT_S=1)
