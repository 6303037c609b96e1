# Tests of the Python package (python/mpiddp), label `python`: each script runs under the
# launcher with DDP_PYTHON (python/CMakeLists.txt; it needs torch, numpy and mpi4py) and finds
# the package in the source tree and the library in the build tree. ~35 s in all on 2 cores.
if(NOT DDP_PYTHON)
  return()
endif()
add_executable(ddp_python IMPORTED)
set_target_properties(ddp_python PROPERTIES IMPORTED_LOCATION ${DDP_PYTHON})
set(DDP_PY_ENV PYTHONPATH=${PROJECT_SOURCE_DIR}/python MPIDDP_LIBRARY=$<TARGET_FILE:mpiddp>)
set(DDP_PY_DIR ${CMAKE_CURRENT_SOURCE_DIR}/python)
# name script np timeout: the script checks that its world has np ranks
foreach(t "api;test_api.py;2;60" "hook;test_hook.py;2;60" "hook;test_hook.py;3;60"
          "fmnist;test_fmnist.py;2;180" "backend;test_backend.py;2;60"
          "backend;test_backend.py;3;60")
  list(GET t 0 name)
  list(GET t 1 script)
  list(GET t 2 np)
  list(GET t 3 timeout)
  ddp_add_mpi_test(NAME python_${name} PROGRAM ddp_python NP ${np} ARGS ${DDP_PY_DIR}/${script} ${np}
    LABELS python TIMEOUT ${timeout} ENV ${DDP_PY_ENV} SKIP_CODE 0)
endforeach()
# device buffers through the binding, on the emulated device
foreach(np 1 2)
  ddp_add_mpi_test(NAME python_device PROGRAM ddp_python NP ${np}
    ARGS ${DDP_PY_DIR}/test_device.py ${np} LABELS python device TIMEOUT 60
    ENV ${DDP_PY_ENV} DDP_DEVICE_EMULATE=1 SKIP_CODE 0)
endforeach()
# FSDP on the backend against gloo: needs a torch whose FSDP runs on the CPU (2.x; skips, 77,
# on Debian's 1.13, whose FSDP does not import under Python 3.11)
ddp_add_mpi_test(NAME python_fsdp PROGRAM ddp_python NP 2 ARGS ${DDP_PY_DIR}/test_fsdp.py 2
  LABELS python TIMEOUT 180 ENV ${DDP_PY_ENV} SKIP_CODE 77)
# the backend losing a rank mid-collective: frozen (SIGSTOP: only the watchdog can end the
# job) and killed (SIGKILL: mpirun or the watchdog); tests/robust_run.sh checks the ending
# (named here: robust.cmake, which also sets it, is read after this file)
set(DDP_PY_ROBUST_RUN bash ${PROJECT_SOURCE_DIR}/tests/robust_run.sh)
ddp_add_mpi_test(NAME python_backend_stall PROGRAM ddp_python NP 2
  ARGS ${DDP_PY_DIR}/test_backend_kill.py 2 stop LABELS python robust TIMEOUT 60
  ENV ${DDP_PY_ENV} DDP_TIMEOUT_S=3 SKIP_CODE 0
  WRAP ${DDP_PY_ROBUST_RUN} --expect fail --max-s 25
    --want "mpiddp ABORT: watchdog: timeout after [0-9.]+ s \\(DDP_TIMEOUT_S=3\\) waiting for collective #[0-9]+ allreduce .*peers that had not answered: 1"
    --not "finished although" --)
ddp_add_mpi_test(NAME python_backend_kill PROGRAM ddp_python NP 2
  ARGS ${DDP_PY_DIR}/test_backend_kill.py 2 kill LABELS python robust TIMEOUT 60
  ENV ${DDP_PY_ENV} DDP_TIMEOUT_S=3 SKIP_CODE 0
  WRAP ${DDP_PY_ROBUST_RUN} --expect fail --max-s 25 --want "rank 1 raises SIGKILL"
    --not "finished although" --)
# label abi: the binding across MPI handle ABIs; CI's MPICH build runs these too (ci/test.sh)
set_property(TEST python_hook_np2 python_hook_np3 python_device_np1 python_device_np2
  python_backend_np2 APPEND PROPERTY LABELS abi)
# cmake --install (moved prefix) and pip install --target, outside the build tree
ddp_add_mpi_test(NAME python_install_np2 LABELS python install TIMEOUT 120
  COMMAND bash ${DDP_PY_DIR}/install.sh ${PROJECT_BINARY_DIR} ${DDP_PYTHON} ${DDP_LAUNCH}
          ${PROJECT_SOURCE_DIR})
# init_process_group under SLURM (srun and mpirun inside sbatch), on the private SLURM of
# ci/slurm/with_slurm.sh; skips (77) without slurm-wlm / munge
ddp_add_mpi_test(NAME python_slurm_np2 LABELS python slurm TIMEOUT 240 SKIP_CODE 77 RUN_SERIAL
  ENV ${DDP_PY_ENV}
  COMMAND bash ${PROJECT_SOURCE_DIR}/ci/slurm/with_slurm.sh
          --scratch ${CMAKE_CURRENT_BINARY_DIR}/python_slurm_tmp --
          bash ${DDP_PY_DIR}/slurm_torch.sh ${PROJECT_SOURCE_DIR} ${DDP_PYTHON} 2)
