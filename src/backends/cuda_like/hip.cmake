# The cuda backend built for AMD GPUs with HIP (OPREG_GPU_VENDOR=hip), included by
# CMakeLists.txt with kernel_sources and list_sources set. It still registers as backend "cuda"
# (DESIGN.md); the thread-block cluster variants (sm_90 only) are left out.
#
# Debian bookworm's HIP is ROCm 5.2 (apt-get install hipcc; ../shared/research/hip-rocm52.md).
# CMake's own HIP language looks for <ROCm root>/lib/cmake/hip-lang, which Debian keeps under
# lib/<multiarch>/cmake: so the kernels are compiled by hipcc through custom commands, and the
# host sources by the project's C++ compiler against hip::host.
find_program(OPREG_HIPCC hipcc)
find_package(hip CONFIG QUIET)
if(NOT OPREG_HIPCC OR NOT hip_FOUND)
  opreg_backend_missing(OPREG_WITH_CUDA "cuda backend (HIP)"
                        "OPREG_GPU_VENDOR=hip needs hipcc and HIP's CMake package (Debian: apt-get install hipcc, or scripts/install-deps.sh hip)")
  return()
endif()
# gfx90a (MI200) and gfx940 (MI300; ROCm 5.2 has no gfx942).
set(OPREG_HIP_ARCHITECTURES "gfx90a;gfx940" CACHE STRING "AMD GPU architectures of the HIP build's kernels")

set(flags -x hip -std=c++20 -fPIC -DOPREG_USE_HIP=1 -DNDEBUG -O3 -Wall -Wextra
    -ffile-prefix-map=${PROJECT_SOURCE_DIR}/= -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/include
    -I${PROJECT_BINARY_DIR}/include)
foreach(arch IN LISTS OPREG_HIP_ARCHITECTURES)
  list(APPEND flags --offload-arch=${arch})
endforeach()
if(OPREG_WERROR)
  list(APPEND flags -Werror)
endif()
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/hip)
set(objects "")
foreach(src IN LISTS kernel_sources)
  string(REPLACE "/" "_" name "${src}")
  set(obj ${CMAKE_CURRENT_BINARY_DIR}/hip/${name}.o)
  add_custom_command(OUTPUT ${obj}
                     COMMAND ${OPREG_HIPCC} ${flags} -MD -MF ${obj}.d -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
                     DEPFILE ${obj}.d
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src}
                     COMMENT "hipcc ${src} (${OPREG_HIP_ARCHITECTURES})"
                     VERBATIM)
  list(APPEND objects ${obj})
endforeach()
add_custom_target(opreg_hip_kernels DEPENDS ${objects})
set_source_files_properties(${objects} DIRECTORY ${PROJECT_SOURCE_DIR}/src PROPERTIES EXTERNAL_OBJECT ON GENERATED ON)
target_sources(opreg PRIVATE ${list_sources} ${objects})
add_dependencies(opreg opreg_hip_kernels)
target_compile_definitions(opreg PRIVATE OPREG_HAVE_CUDA=1 OPREG_USE_HIP=1)
set_target_properties(hip::host PROPERTIES IMPORTED_GLOBAL TRUE)
target_link_libraries(opreg PRIVATE hip::host)
# The static library takes the same kernel objects (src/CMakeLists.txt).
set(OPREG_EXTRA_OBJECTS "${objects}" PARENT_SCOPE)
# "hip", not "cuda": the GPU tests and benchmarks are CUDA programs; there is no AMD GPU to run on.
list(APPEND OPREG_BACKENDS hip)
set(OPREG_BACKENDS "${OPREG_BACKENDS}" PARENT_SCOPE)
