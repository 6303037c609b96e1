# Tests of the sampler / dataset / loader layer (samplers/).
set(DDP_SAMPLER_TMP ${CMAKE_CURRENT_BINARY_DIR}/sampler_tmp)
file(MAKE_DIRECTORY ${DDP_SAMPLER_TMP})

ddp_add_test_exe(sampler_fixtures sampler_fixtures.c)
ddp_add_mpi_test(NAME sampler_fixtures EXE sampler_fixtures NP 0
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sampler_torch.txt ${DDP_SAMPLER_TMP}
  LABELS quick TIMEOUT 60)
