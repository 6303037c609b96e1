# ddp_train --device cuda with the model's arithmetic on a real GPU (issue 7 item 4): loss
# per step against the host run (f32, bf16, fp16) and a resume, np=2 on one GPU. Label gpu:
# exits 77 (skipped) where no CUDA device is present, as in CI.
if(TARGET ddp_train)
  add_test(NAME train_gpu_np2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_gpu.sh
           ${DDP_MPIEXEC} $<TARGET_FILE:ddp_train> ${CMAKE_CURRENT_BINARY_DIR}/train_gpu_tmp)
  set_tests_properties(train_gpu_np2 PROPERTIES TIMEOUT 240 LABELS "gpu;train;mpi"
    ENVIRONMENT "${DDP_TEST_ENV}" SKIP_RETURN_CODE 77)
endif()
