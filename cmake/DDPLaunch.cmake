# Which MPI the build uses, and a launcher that belongs to it (included after find_package(MPI)).
#
# FindMPI keeps the first `mpiexec` it finds when only MPI_C_COMPILER is changed: with MPICH's
# compiler (mpicc.mpich) beside Debian's Open MPI that is Open MPI's mpiexec, which starts N
# MPICH singletons instead of one job of N ranks. So the library's flavour is read from mpi.h,
# the launcher's from its --version, and a mismatch is resolved here: a launcher FindMPI picked
# is replaced by a matching one (mpiexec.mpich, mpiexec.hydra, ... next to the compiler), a
# launcher the user named (-DMPIEXEC_EXECUTABLE=...) that does not match stops the configure
# unless -DDDP_MPIEXEC_CHECK=OFF. Results:
#   DDP_MPI_FLAVOR     openmpi | mpich | intel | unknown (from mpi.h)
#   DDP_LAUNCHER_KIND  openmpi | mpich | intel | srun (what tools/mpilaunch calls MPILAUNCH_KIND)
#   MPIEXEC_EXECUTABLE the launcher (cache)
option(DDP_MPIEXEC_CHECK "Fail the configure when MPIEXEC_EXECUTABLE does not belong to the MPI library" ON)

include(CheckSymbolExists)

# Flavour of the MPI library from its header (Intel MPI also defines MPICH_VERSION).
function(ddp__mpi_flavor out)
  set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_QUIET ON)
  check_symbol_exists(OMPI_MAJOR_VERSION mpi.h DDP__MPI_IS_OMPI)
  check_symbol_exists(I_MPI_VERSION mpi.h DDP__MPI_IS_IMPI)
  check_symbol_exists(MPICH_VERSION mpi.h DDP__MPI_IS_MPICH)
  if(DDP__MPI_IS_OMPI)
    set(${out} openmpi PARENT_SCOPE)
  elseif(DDP__MPI_IS_IMPI)
    set(${out} intel PARENT_SCOPE)
  elseif(DDP__MPI_IS_MPICH)
    set(${out} mpich PARENT_SCOPE)
  else()
    set(${out} unknown PARENT_SCOPE)
  endif()
endfunction()

# Kind of a launcher, as tools/mpilaunch tells it (from its --version output).
function(ddp__launcher_kind exe out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=MPILAUNCH_KIND MPILAUNCH_MPIEXEC=${exe}
                          bash ${PROJECT_SOURCE_DIR}/tools/mpilaunch --kind
                  OUTPUT_VARIABLE k ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 30
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR k STREQUAL "")
    set(k unknown)
  endif()
  set(${out} ${k} PARENT_SCOPE)
endfunction()

set(DDP__NAME_openmpi "Open MPI")
set(DDP__NAME_mpich "MPICH")
set(DDP__NAME_intel "Intel MPI")
set(DDP__NAME_srun "SLURM (srun)")
set(DDP__NAME_unknown "an unknown MPI")

ddp__mpi_flavor(DDP_MPI_FLAVOR)
set(DDP__MPIEXEC_CANDIDATES_openmpi mpiexec.openmpi mpirun.openmpi mpiexec mpirun)
set(DDP__MPIEXEC_CANDIDATES_mpich mpiexec.mpich mpiexec.hydra mpirun.mpich mpiexec mpirun)
set(DDP__MPIEXEC_CANDIDATES_intel mpiexec.hydra mpiexec mpirun)

# ddp__find_launcher(out dir...): the first launcher of the library's flavour in the folders.
function(ddp__find_launcher out)
  set(found "")
  foreach(name ${DDP__MPIEXEC_CANDIDATES_${DDP_MPI_FLAVOR}})
    foreach(d ${ARGN})
      if(NOT found AND d AND EXISTS "${d}/${name}" AND NOT IS_DIRECTORY "${d}/${name}")
        ddp__launcher_kind("${d}/${name}" k)
        if(k STREQUAL DDP_MPI_FLAVOR)
          set(found "${d}/${name}")
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

get_filename_component(cc_real "${MPI_C_COMPILER}" REALPATH)
get_filename_component(cc_dir "${cc_real}" DIRECTORY)
get_filename_component(cc_dir2 "${MPI_C_COMPILER}" DIRECTORY)
set(DDP_LAUNCHER_KIND unknown)
if(MPIEXEC_EXECUTABLE)
  ddp__launcher_kind(${MPIEXEC_EXECUTABLE} DDP_LAUNCHER_KIND)
endif()
# The same flavour is not enough: Open MPI 5 or MPICH 5 from a PyPI wheel beside Debian's Open
# MPI 4 and MPICH 4 got Debian's mpiexec from FindMPI (PATH), another installation and version
# than the library. A launcher of the flavour beside the compiler wins over FindMPI's choice.
if(NOT DDP__MPIEXEC_FROM_USER AND NOT DDP_MPI_FLAVOR STREQUAL "unknown")
  ddp__find_launcher(beside ${cc_dir} ${cc_dir2})
  if(beside)
    get_filename_component(beside_real "${beside}" REALPATH)
    get_filename_component(chosen_real "${MPIEXEC_EXECUTABLE}" REALPATH)
    if(NOT beside_real STREQUAL chosen_real)
      message(STATUS "mpiddp: FindMPI chose ${MPIEXEC_EXECUTABLE}; using ${beside}, the launcher "
        "beside the compiler ${MPI_C_COMPILER}")
      set(MPIEXEC_EXECUTABLE "${beside}" CACHE FILEPATH "Executable for running MPI programs." FORCE)
      set(DDP_LAUNCHER_KIND ${DDP_MPI_FLAVOR})
    endif()
  endif()
endif()
if(NOT DDP_MPI_FLAVOR STREQUAL "unknown" AND NOT DDP_LAUNCHER_KIND STREQUAL DDP_MPI_FLAVOR
   AND NOT DDP_LAUNCHER_KIND STREQUAL "srun")
  set(what "the MPI library is ${DDP__NAME_${DDP_MPI_FLAVOR}} (mpi.h of ${MPI_C_COMPILER}) but the launcher ${MPIEXEC_EXECUTABLE} belongs to ${DDP__NAME_${DDP_LAUNCHER_KIND}}")
  if(DDP__MPIEXEC_FROM_USER AND DDP_MPIEXEC_CHECK)
    message(FATAL_ERROR "mpiddp: ${what}: it would start N singletons instead of one job of N "
      "ranks. Name the launcher of the same MPI (e.g. -DMPIEXEC_EXECUTABLE=mpiexec.mpich for "
      "mpicc.mpich), or -DDDP_MPIEXEC_CHECK=OFF to keep it anyway (every MPI test then fails "
      "its world-size check).")
  elseif(DDP__MPIEXEC_FROM_USER)
    message(WARNING "mpiddp: ${what}; kept because DDP_MPIEXEC_CHECK=OFF (every MPI test will "
      "fail its world-size check)")
  else()
    # Look beside the compiler first (its bin folder), then on PATH.
    set(dirs ${cc_dir} ${cc_dir2})
    if(DEFINED ENV{I_MPI_ROOT})
      list(APPEND dirs $ENV{I_MPI_ROOT}/bin)
    endif()
    string(REPLACE ":" ";" path_dirs "$ENV{PATH}")
    list(APPEND dirs ${path_dirs})
    list(REMOVE_DUPLICATES dirs)
    ddp__find_launcher(found ${dirs})
    if(NOT found)
      message(FATAL_ERROR "mpiddp: ${what} (FindMPI's choice), and no launcher of "
        "${DDP__NAME_${DDP_MPI_FLAVOR}} (${DDP__MPIEXEC_CANDIDATES_${DDP_MPI_FLAVOR}}) was found "
        "beside the compiler or on PATH: name it with -DMPIEXEC_EXECUTABLE=...")
    endif()
    message(STATUS "mpiddp: ${what} (FindMPI's choice): using ${found}")
    set(MPIEXEC_EXECUTABLE "${found}" CACHE FILEPATH "Executable for running MPI programs." FORCE)
    set(DDP_LAUNCHER_KIND ${DDP_MPI_FLAVOR})
  endif()
endif()
if(DDP_LAUNCHER_KIND STREQUAL "unknown")
  message(WARNING "mpiddp: cannot tell which launcher '${MPIEXEC_EXECUTABLE}' is; the tests "
    "will ask tools/mpilaunch to work it out at run time (set MPILAUNCH_KIND to override)")
endif()
message(STATUS "mpiddp: MPI library ${DDP__NAME_${DDP_MPI_FLAVOR}}, launcher ${MPIEXEC_EXECUTABLE} (${DDP__NAME_${DDP_LAUNCHER_KIND}})")
