# Cluster tests (issue 15, label `cluster`): emulated hosts on this machine (network, UTS, IPC
# and mount namespaces on a private bridge: ci/cluster/cluster.sh), Open MPI started through an
# ssh replacement, TCP and UCX between hosts, a host that dies, a link that goes down, a bad
# link, SLURM with one slurmd per host, an elastic run losing and regaining a host. Each test
# brings its hosts up, runs one scenario of
# tests/cluster_check.sh, takes them down, and fails if the root namespace's netns, links or
# routes differ from before. Needs root and iproute2 (else skip, 77).
ddp_add_test_exe(cluster_topo cluster_topo.c)

# cluster_add_test(name mode hosts timeout): ddp_add_mpi_test of a cluster_check.sh scenario on
# `hosts` emulated hosts; the command gets TIMEOUT - 20 s, so that the hosts are always taken
# down before ctest would kill the test. The source and build folders are shared with the hosts
# (a build under /tmp would otherwise be hidden by each host's private /tmp).
function(cluster_add_test name mode hosts timeout) # [more labels...]
  math(EXPR limit "${timeout} - 20")
  ddp_add_mpi_test(NAME ${name} LABELS cluster ${ARGN} TIMEOUT ${timeout} SKIP_CODE 77 RUN_SERIAL
    COMMAND bash ${PROJECT_SOURCE_DIR}/ci/cluster/cluster.sh with ${hosts}
    --limit ${limit} --share ${PROJECT_SOURCE_DIR} --share ${PROJECT_BINARY_DIR} -- bash ${CMAKE_CURRENT_SOURCE_DIR}/cluster_check.sh ${mode}
    ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cluster/${mode})
endfunction()

if(DDP_SANITIZE STREQUAL "OFF")
  cluster_add_test(cluster_info_2x2 info 2 90)
  cluster_add_test(cluster_coll_ob1 coll-ob1 3 150)
  cluster_add_test(cluster_coll_ucx coll-ucx 3 150)
  if(TARGET ddp_train AND EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
    cluster_add_test(cluster_train_2x2 train 2 150)
    cluster_add_test(cluster_hostdeath_ob1 hostdeath-ob1 2 120)
    cluster_add_test(cluster_hostdeath_ucx hostdeath-ucx 2 120)
    cluster_add_test(cluster_linkdown linkdown 3 120)
    cluster_add_test(cluster_badlink badlink 2 150)
    cluster_add_test(cluster_slurm slurm 2 180)
    cluster_add_test(cluster_elastic elastic 2 150 elastic)
  endif()
endif()
