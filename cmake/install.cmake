# `cmake --install BUILD --prefix P`: the engine as a CMake package (docs/api.md).
#   find_package(gpuopt CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE gpuopt::gpuopt)
# Static libraries in P/lib, the public headers (include/gpuopt/*.h and the value types they use,
# include/core/*.h) in P/include/gpuopt, and gpuoptConfig.cmake, which finds the same Debian
# packages the build used. In a CUDA build gpuopt::gpuopt carries the CUDA backend, linked whole
# (its ops register themselves). CTest example.installed_package builds examples/ against it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GPUOPT_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/gpuopt)
set(GPUOPT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpuopt)

add_library(gpuopt_package INTERFACE)
set_target_properties(gpuopt_package PROPERTIES EXPORT_NAME gpuopt)
# In the build tree the CUDA backend is ${GPUOPT_CUDA_BACKEND}; in the installed package the same
# whole-archive link names the exported target (a bare name would become -lgpuopt_cuda).
target_link_libraries(gpuopt_package INTERFACE $<BUILD_INTERFACE:${GPUOPT_CUDA_BACKEND}> gpuopt_engine)
if(GPUOPT_HAVE_CUDA)
  target_link_libraries(gpuopt_package INTERFACE
    "$<INSTALL_INTERFACE:$<LINK_LIBRARY:WHOLE_ARCHIVE,gpuopt::gpuopt_cuda>>")
endif()
target_include_directories(gpuopt_package INTERFACE $<INSTALL_INTERFACE:${GPUOPT_INSTALL_INCLUDEDIR}>)

set(_gpuopt_export gpuopt_package gpuopt_options gpuopt_core gpuopt_engine gpuopt_onnx_proto)
if(GPUOPT_HAVE_CUDA)
  list(APPEND _gpuopt_export gpuopt_cuda)
  if(TARGET gpuopt_cuda_sm90a)  # the sm_90a kernels gpuopt_cuda links (src/CMakeLists.txt)
    list(APPEND _gpuopt_export gpuopt_cuda_sm90a)
  endif()
endif()
install(TARGETS ${_gpuopt_export} EXPORT gpuoptTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${GPUOPT_INSTALL_INCLUDEDIR})
install(EXPORT gpuoptTargets NAMESPACE gpuopt:: DESTINATION ${GPUOPT_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpuoptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpuoptConfig.cmake INSTALL_DESTINATION ${GPUOPT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpuoptConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpuoptConfig.cmake ${PROJECT_BINARY_DIR}/gpuoptConfigVersion.cmake
  DESTINATION ${GPUOPT_INSTALL_CMAKEDIR})
