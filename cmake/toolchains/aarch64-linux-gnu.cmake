# Cross compiling for aarch64 Linux (Kunpeng hosts of Ascend servers) with Debian's cross
# compiler, whose C and C++ runtime live under /usr/aarch64-linux-gnu, and running the programs
# built (tests, gtest discovery) under qemu's user-mode emulator. `make aarch64` uses this file;
# its packages are scripts/packages-aarch64.txt (scripts/install-deps.sh aarch64).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(OPREG_AARCH64_SYSROOT /usr/aarch64-linux-gnu)

function(opreg_aarch64_tool var program)
  find_program(${var} ${program})
  if(NOT ${var})
    message(FATAL_ERROR "${program}: not found. The aarch64 build needs Debian's g++-aarch64-linux-gnu and "
                        "qemu-user: scripts/install-deps.sh aarch64")
  endif()
endfunction()
opreg_aarch64_tool(OPREG_AARCH64_CXX aarch64-linux-gnu-g++)
opreg_aarch64_tool(OPREG_AARCH64_CC aarch64-linux-gnu-gcc)
opreg_aarch64_tool(OPREG_AARCH64_QEMU qemu-aarch64)
set(CMAKE_CXX_COMPILER ${OPREG_AARCH64_CXX})
set(CMAKE_C_COMPILER ${OPREG_AARCH64_CC})
# -L: where qemu finds the dynamic loader and the target's shared libraries.
set(CMAKE_CROSSCOMPILING_EMULATOR ${OPREG_AARCH64_QEMU} -L ${OPREG_AARCH64_SYSROOT})

# Libraries, headers and packages only from the target's tree; programs (cmake, git) from the host.
# A package found elsewhere is named by its <Package>_DIR (make aarch64's header-only packages).
set(CMAKE_FIND_ROOT_PATH ${OPREG_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
