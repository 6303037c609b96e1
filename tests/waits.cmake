# Waits inside the library cost no CPU: a rank waiting 500 ms for a late peer in
# shm (futex), mpi and ring (spin, yield, naps) allreduces, blocking and non-blocking.
ddp_add_test_exe(coll_wait_cpu coll_wait_cpu.c)
ddp_add_mpi_test(NAME coll_wait_cpu PROGRAM coll_wait_cpu NP 2 LABELS quick mpi)
