# The op manifest (include/opreg/op_manifest.h) as CMake lists, for what CMake itself enumerates
# per op (the cpu tests' ctest entries): opreg_manifest_ops(<var>) sets <var> to the ops' base
# names, each once, in the manifest's order.
function(opreg_manifest_ops out)
  file(READ ${PROJECT_SOURCE_DIR}/include/opreg/op_manifest.h text)
  # Each OP(ident, base, direction, ...) entry of OPREG_OPS.
  string(REGEX MATCHALL "OP\\([a-z0-9_]+, *[a-z0-9_]+, *(fwd|bwd)," entries "${text}")
  set(bases "")
  foreach(entry IN LISTS entries)
    string(REGEX REPLACE "^OP\\([a-z0-9_]+, *([a-z0-9_]+),.*$" "\\1" base "${entry}")
    list(APPEND bases ${base})
  endforeach()
  list(REMOVE_DUPLICATES bases)
  if(NOT bases)
    message(FATAL_ERROR "no OP(...) entries found in include/opreg/op_manifest.h")
  endif()
  set(${out} ${bases} PARENT_SCOPE)
endfunction()
