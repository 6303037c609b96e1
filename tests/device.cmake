# Device layer and device-memory collectives: under the host emulation (label emulate, in CI)
# and on a real GPU (label gpu: exits 77 with the reason where there is none).
ddp_add_test_exe(device_emu device_emu.c)
ddp_add_mpi_test(NAME device_emu_np1 EXE device_emu NP 1 LABELS "emulate;quick" TIMEOUT 60
  ENV DDP_DEVICE_EMULATE=1)
ddp_add_mpi_test(NAME device_none_np1 EXE device_emu NP 1 ARGS none LABELS "emulate;quick"
  TIMEOUT 60)
