# Extra link needs of the apps: OpenBLAS (with openblas_set_num_threads) for the training
# and benchmark programs; cuBLAS for their GPU paths when CUDA is built.
find_library(DDP_OPENBLAS_LIB NAMES openblas)
find_path(DDP_CBLAS_INCLUDE NAMES cblas.h PATH_SUFFIXES openblas-pthread openblas)
if(NOT DDP_OPENBLAS_LIB OR NOT DDP_CBLAS_INCLUDE)
  message(FATAL_ERROR "OpenBLAS not found (install libopenblas-dev)")
endif()
message(STATUS "mpiddp: OpenBLAS ${DDP_OPENBLAS_LIB} (cblas.h in ${DDP_CBLAS_INCLUDE})")
# cuBLAS: the toolkit's (CUDA::cublas), else the pip wheel nvidia-cublas (-DDDP_CUBLAS_ROOT=
# <site-packages>/nvidia/cublas, as ci/gpu-check.sh passes: libcublas.so.N, no .so link);
# without it ddp_train keeps its host arithmetic on a GPU (buckets still on the device).
set(DDP_CUBLAS_ROOT "" CACHE PATH "cuBLAS outside the CUDA toolkit (e.g. the nvidia-cublas wheel)")
if(DDP_HAVE_CUDA AND NOT TARGET CUDA::cublas AND DDP_CUBLAS_ROOT)
  find_library(DDP_CUBLAS_LIB NAMES cublas libcublas.so.13 libcublas.so.12 HINTS ${DDP_CUBLAS_ROOT}
    PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
  find_path(DDP_CUBLAS_INCLUDE cublas_v2.h HINTS ${DDP_CUBLAS_ROOT} PATH_SUFFIXES include NO_DEFAULT_PATH)
  if(DDP_CUBLAS_LIB AND DDP_CUBLAS_INCLUDE)
    add_library(CUDA::cublas UNKNOWN IMPORTED)
    set_target_properties(CUDA::cublas PROPERTIES IMPORTED_LOCATION ${DDP_CUBLAS_LIB}
      INTERFACE_INCLUDE_DIRECTORIES ${DDP_CUBLAS_INCLUDE})
  endif()
endif()
set(DDP_HAVE_CUBLAS 0)
if(DDP_HAVE_CUDA AND TARGET CUDA::cublas)
  set(DDP_HAVE_CUBLAS 1)
elseif(DDP_HAVE_CUDA)
  message(STATUS "mpiddp: cuBLAS not found: ddp_train --device cuda keeps the host arithmetic")
endif()
# ddp_info links OpenBLAS to report its kernel and a GEMM rate per rank (apps/common/app_blas.h).
foreach(app ddp_bench ddp_train ddp_info)
  if(TARGET ${app})
    target_link_libraries(${app} PRIVATE ${DDP_OPENBLAS_LIB})
    target_include_directories(${app} PRIVATE ${DDP_CBLAS_INCLUDE})
    if(DDP_HAVE_CUDA AND NOT app STREQUAL "ddp_info")
      target_link_libraries(${app} PRIVATE CUDA::cudart)
    endif()
    if(DDP_HAVE_CUBLAS AND NOT app STREQUAL "ddp_info")
      target_link_libraries(${app} PRIVATE CUDA::cublas)
    endif()
  endif()
endforeach()
# ddp_train's checkpoint files carry a CRC32 computed with zlib.
if(TARGET ddp_train)
  target_link_libraries(ddp_train PRIVATE ZLIB::ZLIB)
endif()
# ddp_train --device cuda on a real GPU: the MLP's forward/backward with cuBLAS and small CUDA
# kernels (apps/common/train_gpu.cu); without CUDA the app keeps the host arithmetic only.
if(TARGET ddp_train AND DDP_HAVE_CUBLAS)
  target_sources(ddp_train PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/common/train_gpu.cu)
  target_compile_definitions(ddp_train PRIVATE DDP_TRAIN_GPU=1)
  set(DDP_TRAIN_GPU_CUDA_FLAGS -Xcompiler=-Wall,-Wextra)
  if(DDP_WERROR)
    list(APPEND DDP_TRAIN_GPU_CUDA_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  target_compile_options(ddp_train PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${DDP_TRAIN_GPU_CUDA_FLAGS}>")
  set_target_properties(ddp_train PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
endif()
