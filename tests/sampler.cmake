# Tests of the sampler / dataset / loader layer (samplers/).
set(DDP_SAMPLER_TMP ${CMAKE_CURRENT_BINARY_DIR}/sampler_tmp)
file(MAKE_DIRECTORY ${DDP_SAMPLER_TMP})

ddp_add_test_exe(sampler_fixtures sampler_fixtures.c)
ddp_add_mpi_test(NAME sampler_fixtures PROGRAM sampler_fixtures NP 0
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sampler_torch.txt ${DDP_SAMPLER_TMP} LABELS quick)

ddp_add_test_exe(sampler_idx sampler_idx.c)
target_link_libraries(sampler_idx PRIVATE ddp_kit ZLIB::ZLIB) # ddp_kit: Fashion-MNIST
ddp_add_mpi_test(NAME sampler_idx PROGRAM sampler_idx NP 0 ARGS ${DDP_SAMPLER_TMP} LABELS quick)

ddp_add_test_exe(sampler_union sampler_union.c)
ddp_add_mpi_test(NAME sampler_union PROGRAM sampler_union NP 1 3 4 LABELS quick)

ddp_add_test_exe(sampler_loader sampler_loader.c)
target_link_libraries(sampler_loader PRIVATE ddp_kit)
ddp_add_mpi_test(NAME sampler_loader PROGRAM sampler_loader NP 2 LABELS quick TIMEOUT 90)

# apps/ddp_sampler: against the committed fixtures, and against Debian's python3-torch with
# random arguments (a missing torch fails the test unless MPIDDP_SKIP_TORCH=1).
if(TARGET ddp_sampler)
  ddp_add_mpi_test(NAME sampler_app LABELS quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sampler_app.sh
    $<TARGET_FILE:ddp_sampler> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sampler_torch.txt)
  ddp_add_mpi_test(NAME sampler_vs_torch LABELS quick SKIP_CODE 77 COMMAND ${DDP_SYSTEM_PYTHON3}
    ${CMAKE_CURRENT_SOURCE_DIR}/sampler_vs_torch.py $<TARGET_FILE:ddp_sampler> 200)
  # The speed targets (index generation < 1 ms, loader >= 10x the training rate) are judged
  # by bench/targets.sh (`ddp_sampler --bench --check`), not here: timing on shared machines.
endif()

# Token-window datasets (language-model samples) through the sampler and the loader.
ddp_add_test_exe(sampler_tokens sampler_tokens.c)
ddp_add_mpi_test(NAME sampler_tokens PROGRAM sampler_tokens NP 1 2 LABELS quick gpt)
