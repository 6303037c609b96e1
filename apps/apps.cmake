# Extra link needs of the apps: the CUDA runtime for the device paths of ddp_bench and ddp_train
# when CUDA is built; ddp_train --device cuda on a real GPU runs the MLP's forward/backward with
# cuBLAS and small CUDA kernels (apps/kit/train_gpu.cu, ddp_kit_gpu) when cuBLAS was found
# (apps/kit/CMakeLists.txt); without it the app keeps the host arithmetic only.
foreach(app ddp_bench ddp_train)
  if(TARGET ${app} AND DDP_HAVE_CUDA)
    target_link_libraries(${app} PRIVATE CUDA::cudart)
  endif()
endforeach()
if(TARGET ddp_train AND TARGET ddp_kit_gpu)
  target_link_libraries(ddp_train PRIVATE ddp_kit_gpu)
  target_compile_definitions(ddp_train PRIVATE DDP_TRAIN_GPU=1)
endif()
