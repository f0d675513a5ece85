# spmd_add_executable(NAME FILE.spmd [INCLUDE_DIRS dir...] [DEFINES NAME=VALUE...])
#
# Compiles FILE.spmd to C with the installed spmdc (`spmdc -S`, with -I for
# each of INCLUDE_DIRS and -D for each of DEFINES) and builds executable
# NAME from it, linked with spmdc::spmdrt.  spmdc writes a depfile naming the
# model and every module it imports, so the C is regenerated when any of them
# changes (or spmdc does).  NAME is an ordinary executable target: add flags,
# install it, or run it under mpirun as any other.
include_guard(GLOBAL)

function(spmd_add_executable name source)
  cmake_parse_arguments(PARSE_ARGV 2 SPMD "" "" "INCLUDE_DIRS;DEFINES")
  if(SPMD_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spmd_add_executable(${name}): unknown arguments: ${SPMD_UNPARSED_ARGUMENTS}\n"
      "usage: spmd_add_executable(NAME FILE.spmd [INCLUDE_DIRS dir...] [DEFINES NAME=VALUE...])")
  endif()
  get_filename_component(src "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(args "")
  foreach(dir IN LISTS SPMD_INCLUDE_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND args -I "${dir}")
  endforeach()
  foreach(def IN LISTS SPMD_DEFINES)
    if(NOT def MATCHES "^[A-Za-z_][A-Za-z0-9_]*=.+$")
      message(FATAL_ERROR "spmd_add_executable(${name}): DEFINES takes NAME=VALUE, got '${def}'")
    endif()
    list(APPEND args -D "${def}")
  endforeach()
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${name}.spmd.c")
  set(dep "${CMAKE_CURRENT_BINARY_DIR}/${name}.spmd.d")
  add_custom_command(OUTPUT "${out}"
    COMMAND spmdc::spmdc -S "${src}" -o "${out}" --depfile "${dep}" ${args}
    DEPENDS "${src}" spmdc::spmdc
    DEPFILE "${dep}"
    COMMENT "spmdc ${source} -> ${name}"
    VERBATIM)
  add_executable(${name} "${out}")
  set_target_properties(${name} PROPERTIES C_STANDARD 17 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_link_libraries(${name} PRIVATE spmdc::spmdrt)
endfunction()
