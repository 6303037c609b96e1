/* The apps' BLAS (OpenBLAS) check: fast GEMMs with no user action, and what ddp_info reports.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels once, when the library loads,
 * from the CPU model. A model it does not know gets its generic kernel: Debian's 0.3.21 runs
 * "Prescott" (SSE3) on Intel family 6 model 207 although the CPU has AVX-512, and single-thread
 * sgemm 64x2048x2048 drops from 80-95 GFLOP/s to 25. app_blas_auto(), called first thing in
 * main, notices that case (a generic kernel on a CPU with AVX2/AVX-512 enabled by the OS) and
 * re-executes the program (execv of /proc/self/exe: same pid, arguments and environment) with
 * OPENBLAS_CORETYPE set to the kernel the CPU supports; the variable is only read at load.
 * It runs before MPI_Init, so a launcher (mpirun, srun, Hydra) sees one process that started
 * a few milliseconds later: no MPI state, connection or thread of ours exists yet, and the
 * pid, parent, inherited descriptors and environment all stay. Every rank decides for itself
 * from its own CPU, so ranks on the same kind of node decide alike.
 *
 * A user's own OPENBLAS_CORETYPE always wins (even an empty one): nothing is checked then. The
 * re-executed process finds the variable set and carries on; APP_BLAS_FROM (set for it, cleared
 * at once) tells it that it was switched, so app_blas_note() can say so in one line.
 * Definitions in app_blas.c (the kit links OpenBLAS, apps/kit/CMakeLists.txt). */
#ifndef APP_BLAS_H
#define APP_BLAS_H

#include <stddef.h>

/* The best OpenBLAS kernel this CPU supports ("Cooperlake", "SkylakeX", "Haswell"), NULL on a
 * CPU without AVX2. */
const char *app_blas_kernel_for_cpu(void);

/* Call first in main, before MPI_Init / ddp_init. Returns when no switch is needed, when the
 * switch worked, or when it cannot be made (app_blas_note then warns). */
void app_blas_auto(char **argv);

/* "OpenBLAS 0.3.21, kernel Cooperlake (auto: the library chose Prescott for this CPU)". */
void app_blas_describe(char *buf, size_t cap);

/* One line on stdout, "# BLAS: <app_blas_describe>", when the kernel was switched or a generic
 * one still runs on a CPU that could do better (then with a warning), or always with `always`.
 * `print`: this process speaks for its node (local rank 0). */
void app_blas_note(int print, int always);

/* "Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 207), 2 CPUs online, AVX-512 BF16",
 * from /proc/cpuinfo (Linux) and the compiler's CPU feature check. */
void app_cpu_describe(char *buf, size_t cap);

/* Single-thread sgemm rate (GFLOP/s) over about `seconds`, on W-DDP's largest shape
 * (64x2048 times 2048x2048^T: one hidden layer's forward at batch 64). -1 when out of memory. */
double app_blas_sgemm_gflops(double seconds);

#endif /* APP_BLAS_H */
