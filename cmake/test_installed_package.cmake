# CTest example.installed_package: installs this build into a fresh prefix, builds examples/
# alone against it (find_package(gpuopt)), and runs the example on MODEL when one is given.
# -DBUILD_DIR=<gpuopt build> -DSRC_DIR=<source> -DWORK=<scratch dir> [-DMODEL=<model.onnx>]
file(REMOVE_RECURSE ${WORK})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(STEP_OUT "${out}" PARENT_SCOPE)
endfunction()
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
step(${CMAKE_COMMAND} -S ${SRC_DIR}/examples -B ${WORK}/build -G Ninja -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_PREFIX_PATH=${WORK}/prefix)
step(${CMAKE_COMMAND} --build ${WORK}/build)
if(MODEL)
  step(${WORK}/build/gpuopt_example_run_model ${MODEL})
  message("${STEP_OUT}")
endif()
message("example built against ${WORK}/prefix")
