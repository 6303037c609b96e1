# ddp_train --device cuda with the model's arithmetic on a real GPU: loss
# per step against the host run (f32, bf16, fp16) and a resume, np=2 on one GPU. Label gpu:
# exits 77 (skipped) where no CUDA device is present, as in CI.
if(TARGET ddp_train)
  ddp_add_mpi_test(NAME train_gpu_np2 LABELS gpu train mpi TIMEOUT 240 SKIP_CODE 77
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_gpu.sh
            ${DDP_LAUNCH} $<TARGET_FILE:ddp_train> ${CMAKE_CURRENT_BINARY_DIR}/train_gpu_tmp gpu)

  # The same checks without a GPU: ddp_train built with a host stand-in of train_gpu.cu
  # (tests/train_gpu_emu.c) that takes the GPU path on the emulated device, so the wiring
  # (bucket views, grad_ready order, fp16 nonfinite check, downloads, resume) runs in CI.
  add_executable(ddp_train_gpuemu ${PROJECT_SOURCE_DIR}/apps/ddp_train.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/train_gpu_emu.c)
  target_compile_definitions(ddp_train_gpuemu PRIVATE DDP_TRAIN_GPU=1
                             DDP_TRAIN_GPU_KIND=DDP_DEVICE_EMULATED)
  target_link_libraries(ddp_train_gpuemu PRIVATE ddp_kit mpiddp m)
  ddp_add_mpi_test(NAME train_gpu_emu_np2 LABELS emulate train mpi TIMEOUT 240 SKIP_CODE 77
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_gpu.sh ${DDP_LAUNCH}
            $<TARGET_FILE:ddp_train_gpuemu> ${CMAKE_CURRENT_BINARY_DIR}/train_gpu_emu_tmp emulate)
endif()

# The kernels' f16/bf16 rounding (cuda_fp16.h / cuda_bf16.h, host implementations) equals the
# CPU emulation the host run's --amp uses. Needs the CUDA toolkit, not a GPU.
if(DDP_HAVE_CUDA)
  add_executable(train_gpu_round ${CMAKE_CURRENT_SOURCE_DIR}/train_gpu_round.cu)
  target_link_libraries(train_gpu_round PRIVATE ddp_kit m)
  ddp_cuda_warnings(train_gpu_round) # apps/kit/CMakeLists.txt
  ddp_add_mpi_test(NAME train_gpu_round LABELS quick train TIMEOUT 30
    COMMAND $<TARGET_FILE:train_gpu_round>)
endif()
