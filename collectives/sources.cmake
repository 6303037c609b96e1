# Sources of the collectives layer: every .c here is an algorithm, kernel or transport.
file(GLOB DDP_COLL_C CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
file(GLOB DDP_COLL_CU CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu)
list(APPEND DDP_SOURCES ${DDP_COLL_C})
list(APPEND DDP_CUDA_SOURCES ${DDP_COLL_CU})
list(APPEND DDP_PUBLIC_HEADERS ${CMAKE_CURRENT_LIST_DIR}/ddp_collectives.h)
