# Fuzz targets for the parsers that read untrusted bytes: the DDP_* configuration parser, the
# IDX dataset reader and the training checkpoint reader (apps/kit/checkpoint.c, compiled into
# fuzz_ckpt itself so that libFuzzer instruments it).
# Every build replays the committed corpus (tests/fuzz/corpus/<target>) through each target
# (label quick); with -DDDP_FUZZ=ON and clang, libFuzzer binaries run for DDP_FUZZ_SECONDS
# each (label fuzz; ci/fuzz.sh).
set(DDP_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR}/fuzz)
set(DDP_FUZZ_SECONDS 30 CACHE STRING "Seconds each libFuzzer target runs under ctest -L fuzz")

set(DDP_FUZZ_TARGETS config idx ckpt)

if(DDP_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DDP_FUZZ=ON needs clang (configure with -DCMAKE_C_COMPILER=clang)")
  endif()
  # The fuzzed parsers and what they call, built with coverage instrumentation (so libFuzzer
  # is guided by the library code, not only the target file) and independent of the rest of
  # the library (ci/fuzz.sh builds nothing else).
  add_library(ddp_fuzz_lib STATIC ${PROJECT_SOURCE_DIR}/runtime/core/config.c
    ${PROJECT_SOURCE_DIR}/runtime/core/error.c ${PROJECT_SOURCE_DIR}/samplers/dataset.c)
  target_include_directories(ddp_fuzz_lib PUBLIC ${DDP_HEADER_DIRS} ${PROJECT_BINARY_DIR}/include)
  target_compile_options(ddp_fuzz_lib PRIVATE -fsanitize=fuzzer-no-link)
  target_link_libraries(ddp_fuzz_lib PUBLIC MPI::MPI_C ZLIB::ZLIB m)
endif()

foreach(t ${DDP_FUZZ_TARGETS})
  file(GLOB seeds CONFIGURE_DEPENDS ${DDP_FUZZ_DIR}/corpus/${t}/*)
  set(extra)
  if(t STREQUAL "ckpt")
    set(extra ${PROJECT_SOURCE_DIR}/apps/kit/checkpoint.c)
  endif()
  add_executable(fuzz_${t}_replay ${DDP_FUZZ_DIR}/fuzz_${t}.c ${DDP_FUZZ_DIR}/replay_main.c ${extra})
  target_link_libraries(fuzz_${t}_replay PRIVATE mpiddp_static ZLIB::ZLIB m)
  target_include_directories(fuzz_${t}_replay PRIVATE ${DDP_HEADER_DIRS}
    ${PROJECT_SOURCE_DIR}/apps/kit ${PROJECT_BINARY_DIR}/include)
  ddp_add_mpi_test(NAME fuzz_${t}_corpus LABELS quick robust
    COMMAND $<TARGET_FILE:fuzz_${t}_replay> ${seeds})
  if(DDP_FUZZ)
    add_executable(fuzz_${t} ${DDP_FUZZ_DIR}/fuzz_${t}.c ${extra})
    target_link_libraries(fuzz_${t} PRIVATE ddp_fuzz_lib ZLIB::ZLIB m)
    target_include_directories(fuzz_${t} PRIVATE ${DDP_HEADER_DIRS}
      ${PROJECT_SOURCE_DIR}/apps/kit ${PROJECT_BINARY_DIR}/include)
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    math(EXPR tmo "${DDP_FUZZ_SECONDS} + 90")
    ddp_add_mpi_test(NAME fuzz_${t} LABELS fuzz TIMEOUT ${tmo} COMMAND bash
      ${DDP_FUZZ_DIR}/run_fuzz.sh $<TARGET_FILE:fuzz_${t}> ${DDP_FUZZ_SECONDS}
      ${DDP_FUZZ_DIR}/corpus/${t} ${CMAKE_CURRENT_BINARY_DIR}/fuzz_${t}_work)
  endif()
endforeach()
