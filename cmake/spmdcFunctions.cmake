# spmd_add_executable(NAME FILE.spmd [TARGET cpu|cuda] [INCLUDE_DIRS dir...] [DEFINES NAME=VALUE...])
#
# Compiles FILE.spmd to C with the installed spmdc (`spmdc -S`, with -I for
# each of INCLUDE_DIRS and -D for each of DEFINES) and builds executable
# NAME from it, linked with spmdc::spmdrt.  spmdc writes a depfile naming the
# model and every module it imports, so the C is regenerated when any of them
# changes (or spmdc does).  NAME is an ordinary executable target: add flags,
# install it, or run it under mpirun as any other.
#
# TARGET cuda (SPEC 14): spmdc --target=cuda also writes the kernels
# (NAME.spmd.cu), compiled as CUDA with -fmad=false; the project must enable
# the CUDA language, and the executable links with spmdc::spmdrt_cuda, the
# CUDA runtime, which an spmdc built without CUDA does not install.
include_guard(GLOBAL)

# spmdc's flags for INCLUDE_DIRS (-I, made absolute) and DEFINES (-D
# NAME=VALUE, checked), into the list VAR; FN and NAME for the messages.
function(_spmd_flags var fn name include_dirs defines)
  set(args "")
  foreach(dir IN LISTS include_dirs)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND args -I "${dir}")
  endforeach()
  foreach(def IN LISTS defines)
    if(NOT def MATCHES "^[A-Za-z_][A-Za-z0-9_]*=.+$")
      message(FATAL_ERROR "${fn}(${name}): DEFINES takes NAME=VALUE, got '${def}'")
    endif()
    list(APPEND args -D "${def}")
  endforeach()
  set(${var} "${args}" PARENT_SCOPE)
endfunction()

function(spmd_add_executable name source)
  cmake_parse_arguments(PARSE_ARGV 2 SPMD "" "TARGET" "INCLUDE_DIRS;DEFINES")
  if(SPMD_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spmd_add_executable(${name}): unknown arguments: ${SPMD_UNPARSED_ARGUMENTS}\n"
      "usage: spmd_add_executable(NAME FILE.spmd [TARGET cpu|cuda] [INCLUDE_DIRS dir...] [DEFINES NAME=VALUE...])")
  endif()
  if(NOT SPMD_TARGET)
    set(SPMD_TARGET cpu)
  endif()
  if(NOT SPMD_TARGET MATCHES "^(cpu|cuda)$")
    message(FATAL_ERROR "spmd_add_executable(${name}): TARGET is cpu or cuda, got '${SPMD_TARGET}'")
  endif()
  if(SPMD_TARGET STREQUAL "cuda")
    if(NOT TARGET spmdc::spmdrt_cuda)
      message(FATAL_ERROR "spmd_add_executable(${name}): TARGET cuda, but this spmdc has no CUDA runtime "
        "(spmdc::spmdrt_cuda): build spmdc with SPMD_CUDA=ON")
    endif()
    if(NOT CMAKE_CUDA_COMPILER)
      message(FATAL_ERROR "spmd_add_executable(${name}): TARGET cuda needs the CUDA language: enable_language(CUDA)")
    endif()
  endif()
  get_filename_component(src "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  _spmd_flags(args spmd_add_executable ${name} "${SPMD_INCLUDE_DIRS}" "${SPMD_DEFINES}")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${name}.spmd.c")
  set(dep "${CMAKE_CURRENT_BINARY_DIR}/${name}.spmd.d")
  set(outs "${out}")
  if(SPMD_TARGET STREQUAL "cuda")
    list(APPEND outs "${CMAKE_CURRENT_BINARY_DIR}/${name}.spmd.cu")
    list(APPEND args --target=cuda)
  endif()
  add_custom_command(OUTPUT ${outs}
    COMMAND spmdc::spmdc -S "${src}" -o "${out}" --depfile "${dep}" ${args}
    DEPENDS "${src}" spmdc::spmdc
    DEPFILE "${dep}"
    COMMENT "spmdc --target=${SPMD_TARGET} ${source} -> ${name}"
    VERBATIM)
  add_executable(${name} ${outs})
  set_target_properties(${name} PROPERTIES C_STANDARD 17 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  if(SPMD_TARGET STREQUAL "cuda")
    # each operation rounds as on the CPU: no FMA contraction, no fast math
    set_source_files_properties("${CMAKE_CURRENT_BINARY_DIR}/${name}.spmd.cu" PROPERTIES COMPILE_OPTIONS "-fmad=false")
    set_target_properties(${name} PROPERTIES CUDA_ARCHITECTURES "90" CUDA_STANDARD 17)
    target_link_libraries(${name} PRIVATE spmdc::spmdrt_cuda)
  else()
    target_link_libraries(${name} PRIVATE spmdc::spmdrt)
  endif()
endfunction()

# spmd_add_library(NAME FILE.spmd [TARGET cpu|cuda] [INCLUDE_DIRS dir...] [DEFINES NAME=VALUE...])
#
# Builds FILE.spmd's `export fn`s into a shared library with the installed
# spmdc (`spmdc --shared`): libNAME.so and its header libNAME.h (the entry
# points and their description: docs/python.md), in the current binary
# directory, rebuilt when the model, a module it imports or spmdc changes
# (the depfile). NAME is an imported shared-library target: link a C host
# with it (target_link_libraries(host PRIVATE NAME spmdc::spmdrt_shared)
# and #include "libNAME.h"), or load the file from Python
# (spmdc.load($<TARGET_FILE:NAME>), the package in share/spmdc/python).
# The library finds the installed libspmdrt.so through its rpath. TARGET
# cuda builds it for the GPUs (spmdc --target=cuda --shared: spmdc compiles
# the kernels itself, so the project needs no CUDA language).
function(spmd_add_library name source)
  cmake_parse_arguments(PARSE_ARGV 2 SPMD "" "TARGET" "INCLUDE_DIRS;DEFINES")
  if(SPMD_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spmd_add_library(${name}): unknown arguments: ${SPMD_UNPARSED_ARGUMENTS}\n"
      "usage: spmd_add_library(NAME FILE.spmd [TARGET cpu|cuda] [INCLUDE_DIRS dir...] [DEFINES NAME=VALUE...])")
  endif()
  if(NOT SPMD_TARGET)
    set(SPMD_TARGET cpu)
  endif()
  if(NOT SPMD_TARGET MATCHES "^(cpu|cuda)$")
    message(FATAL_ERROR "spmd_add_library(${name}): TARGET is cpu or cuda, got '${SPMD_TARGET}'")
  endif()
  if(SPMD_TARGET STREQUAL "cuda" AND NOT TARGET spmdc::spmdrt_cuda)
    message(FATAL_ERROR "spmd_add_library(${name}): TARGET cuda, but this spmdc has no CUDA runtime "
      "(spmdc::spmdrt_cuda): build spmdc with SPMD_CUDA=ON")
  endif()
  get_filename_component(src "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  _spmd_flags(args spmd_add_library ${name} "${SPMD_INCLUDE_DIRS}" "${SPMD_DEFINES}")
  if(SPMD_TARGET STREQUAL "cuda")
    list(APPEND args --target=cuda)
  endif()
  set(lib "${CMAKE_CURRENT_BINARY_DIR}/lib${name}.so")
  set(header "${CMAKE_CURRENT_BINARY_DIR}/lib${name}.h")
  set(dep "${CMAKE_CURRENT_BINARY_DIR}/lib${name}.spmd.d")
  add_custom_command(OUTPUT "${lib}" "${header}"
    COMMAND spmdc::spmdc --shared "${src}" -o "${lib}" --depfile "${dep}" ${args}
    DEPENDS "${src}" spmdc::spmdc
    DEPFILE "${dep}"
    COMMENT "spmdc --target=${SPMD_TARGET} --shared ${source} -> lib${name}.so"
    VERBATIM)
  add_custom_target(${name}_spmdc ALL DEPENDS "${lib}" "${header}")
  add_library(${name} SHARED IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION "${lib}"
    IMPORTED_NO_SONAME ON
    INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_BINARY_DIR}")
  add_dependencies(${name} ${name}_spmdc)
endfunction()
