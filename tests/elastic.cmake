# Elastic continuation at another world size (issue 28, label `elastic`): the batch plan and
# the ZeRO shard read-back (unit, no MPI).
ddp_add_test_exe(elastic_unit elastic_unit.c)
target_link_libraries(elastic_unit PRIVATE ddp_kit)
ddp_add_mpi_test(NAME elastic_unit PROGRAM elastic_unit NP 0 LABELS quick elastic TIMEOUT 30)
