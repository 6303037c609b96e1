# Sources of the runtime layer (communicator, config, logging, timeline, reducer, device).
file(GLOB DDP_RUNTIME_C CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
file(GLOB DDP_RUNTIME_CU CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu)
list(APPEND DDP_SOURCES ${DDP_RUNTIME_C})
list(APPEND DDP_CUDA_SOURCES ${DDP_RUNTIME_CU})
list(APPEND DDP_PUBLIC_HEADERS
  ${CMAKE_CURRENT_LIST_DIR}/ddp.h
  ${CMAKE_CURRENT_LIST_DIR}/ddp_types.h
  ${CMAKE_CURRENT_LIST_DIR}/ddp_runtime.h
  ${CMAKE_CURRENT_LIST_DIR}/ddp_reducer.h
  ${CMAKE_CURRENT_LIST_DIR}/ddp_device.h)
