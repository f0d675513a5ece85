# cmake --install: what a user of spmdc gets (docs/install.md).
#   bin/spmdc                          the compiler
#   lib/libspmdrt.a, lib/libspmdrt.so  the runtime, static and shared
#   include/spmdrt.h                   its header
#   include/spmdrt_kernels.h           the ABI of --target=cuda's kernels
#   share/spmdc/stdlib/*.spmd          the standard library (spmdc finds it
#                                      relative to its own directory)
#   share/spmdc/editors/vscode/        the VS Code extension (TextMate grammar)
#   share/doc/spmdc/                   README, DESIGN and docs/
#   lib/cmake/spmdc/                   find_package(spmdc): spmdc::spmdc,
#                                      spmdc::spmdrt, spmdc::spmdrt_shared,
#                                      spmd_add_executable(), spmd_add_library()
#   lib/pkgconfig/spmdrt.pc            pkg-config --cflags --libs spmdrt
# Every installed file finds the others by relative paths, so the prefix can
# be moved after installation.
include(CMakePackageConfigHelpers)

set_target_properties(spmdc PROPERTIES EXPORT_NAME spmdc)
set_target_properties(spmdrt PROPERTIES EXPORT_NAME spmdrt)
set_target_properties(spmdrt_shared PROPERTIES EXPORT_NAME spmdrt_shared)

install(TARGETS spmdc spmdrt spmdrt_shared EXPORT spmdcTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT spmdcTargets NAMESPACE spmdc:: DESTINATION ${SPMD_INSTALL_CMAKEDIR})
# the ABI of the kernels spmdc --target=cuda generates (included by their .cu and host C)
install(FILES ${PROJECT_SOURCE_DIR}/runtime/spmdrt_kernels.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# the helpers of the elementwise formulas, which those kernels' fused loops call
install(FILES ${PROJECT_SOURCE_DIR}/runtime/elementwise_formulas.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# spmdc --shared compiles the host interface into every library it builds
# (beside spmdrt.h); the Python package reads those libraries (docs/python.md)
install(FILES ${PROJECT_SOURCE_DIR}/runtime/spmdrt_host.c DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/spmdc DESTINATION ${CMAKE_INSTALL_DATADIR}/spmdc/python
        FILES_MATCHING PATTERN "*.py")

file(GLOB spmd_stdlib_modules CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/stdlib/*.spmd)
install(FILES ${spmd_stdlib_modules} DESTINATION ${SPMD_INSTALL_STDLIBDIR})

file(GLOB spmd_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/DESIGN.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${spmd_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

if(EXISTS ${PROJECT_SOURCE_DIR}/editors/vscode)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/editors/vscode DESTINATION ${CMAKE_INSTALL_DATADIR}/spmdc/editors
    PATTERN "test" EXCLUDE PATTERN "node_modules" EXCLUDE)
endif()

# --- find_package(spmdc)
get_filename_component(SPMD_OPENBLAS_DIR ${SPMD_OPENBLAS_LIB} DIRECTORY)
get_filename_component(SPMD_DNNL_DIR ${SPMD_DNNL_LIB} DIRECTORY)
get_filename_component(SPMD_GOMP_DIR ${SPMD_GOMP_LIB} DIRECTORY)
get_filename_component(SPMD_SLEEF_DIR ${SPMD_SLEEF_LIB} DIRECTORY)
get_filename_component(SPMD_CJSON_DIR ${SPMD_CJSON_LIB} DIRECTORY)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/spmdcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/spmdcConfig.cmake INSTALL_DESTINATION ${SPMD_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/spmdcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/spmdcConfig.cmake ${PROJECT_BINARY_DIR}/spmdcConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/spmdcFunctions.cmake DESTINATION ${SPMD_INSTALL_CMAKEDIR})

# --- spmdrt.pc: paths relative to the .pc file's own directory (${pcfiledir})
spmd_install_relpath(SPMD_PC_PREFIX ${CMAKE_INSTALL_LIBDIR}/pkgconfig .)
string(REGEX REPLACE "/$" "" SPMD_PC_PREFIX "${SPMD_PC_PREFIX}")
if(IS_ABSOLUTE "${SPMD_PC_PREFIX}")
  set(SPMD_PC_PREFIX_VALUE "${SPMD_PC_PREFIX}")
else()
  set(SPMD_PC_PREFIX_VALUE "\${pcfiledir}/${SPMD_PC_PREFIX}")
endif()
foreach(dir BINDIR LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(SPMD_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(SPMD_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# MPI through its own .pc (OpenMPI's ompi-c, MPICH's mpich) so that a plain
# C compiler works; BLAS through openblas.pc when the system has one.
set(SPMD_PC_REQUIRES "")
set(SPMD_PC_REQUIRES_PRIVATE "")
set(SPMD_PC_LIBS_PRIVATE "-lm")
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(SPMD_PC_OMPI QUIET ompi-c)
  pkg_check_modules(SPMD_PC_MPICH QUIET mpich)
  if(SPMD_PC_OMPI_FOUND)
    set(SPMD_PC_REQUIRES "ompi-c")
  elseif(SPMD_PC_MPICH_FOUND)
    set(SPMD_PC_REQUIRES "mpich")
  endif()
endif()
if(OPENBLAS_FOUND)
  set(SPMD_PC_REQUIRES_PRIVATE "openblas")
else()
  set(SPMD_PC_LIBS_PRIVATE "${SPMD_OPENBLAS_LIB} -lm")
endif()
# oneDNN has no .pc file in Debian: its library and libgomp by path
set(SPMD_PC_LIBS_PRIVATE "${SPMD_DNNL_LIB} ${SPMD_GOMP_LIB} ${SPMD_PC_LIBS_PRIVATE}")
# SLEEF (no .pc file on every system): by path
set(SPMD_PC_LIBS_PRIVATE "${SPMD_SLEEF_LIB} ${SPMD_PC_LIBS_PRIVATE}")
# cJSON (.safetensors headers): by path too
set(SPMD_PC_LIBS_PRIVATE "${SPMD_CJSON_LIB} ${SPMD_PC_LIBS_PRIVATE}")
if(SPMD_SANITIZE)
  set(SPMD_PC_LIBS_SANITIZE " -fsanitize=address,undefined")
else()
  set(SPMD_PC_LIBS_SANITIZE "")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/spmdrt.pc.in ${PROJECT_BINARY_DIR}/spmdrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/spmdrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
