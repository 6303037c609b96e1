# Tests of gpt_train (label gpt): agreement with PyTorch at np 1 and 2 (losses of 20 steps,
# step 1's gradients), --deterministic giving the same parameters at np 1, 2 and 4, and
# --recompute / --zero 1 / --zero 2 giving those of the plain run, and resuming (--stop-after,
# SIGUSR1, --zero 1) giving those of the uninterrupted run.
# Small sizes (2 layers, 64 dims, 96 tokens): seconds each.
if(TARGET gpt_train)
  set(DDP_GPT_TMP ${CMAKE_CURRENT_BINARY_DIR}/gpt_tmp)
  file(MAKE_DIRECTORY ${DDP_GPT_TMP})
  # Debian's torch is in /usr/bin/python3's path (another python3 may come first on PATH).
  find_program(DDP_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT DDP_SYSTEM_PYTHON3)
    set(DDP_SYSTEM_PYTHON3 python3)
  endif()
  function(ddp_add_gpt_check name mode np)
    ddp_add_mpi_test(NAME ${name} LABELS gpt mpi TIMEOUT 120 SKIP_CODE 77
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpt_check.sh ${mode} ${np} ${DDP_LAUNCH}
              $<TARGET_FILE:gpt_train> ${DDP_SYSTEM_PYTHON3}
              ${PROJECT_SOURCE_DIR}/bench/peers/torch_gpt.py ${DDP_GPT_TMP}/${name})
  endfunction()
  ddp_add_gpt_check(gpt_vs_torch_np1 torch 1)
  ddp_add_gpt_check(gpt_vs_torch_np2 torch 2)
  ddp_add_gpt_check(gpt_determ_np124 determ 0)
  ddp_add_gpt_check(gpt_variants_np2 variants 2)
  ddp_add_gpt_check(gpt_resume_np2 resume 2)
endif()
