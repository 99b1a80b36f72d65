# The Python front-end (python/deepshard, issue #29): the package and its extension deepshard._C
# (src/python/bindings.cpp, pybind11 over the engines), built into ${PROJECT_BINARY_DIR}/python
# (importable with PYTHONPATH=<build>/python) and installed into DEEPSHARD_PYTHON_INSTALL_DIR.
# Optional: it needs an interpreter whose torch is Debian's python3-torch on the very libtorch
# this tree links (libtorch-dev), and pybind11 (pybind11-dev); without them it is skipped with a
# message. The extension links the (position-independent) layer libraries the engines need.
set(DEEPSHARD_PYTHON "/usr/bin/python3" CACHE FILEPATH
    "Python interpreter of the deepshard package (Debian's python3, whose torch is python3-torch)")
set(ds_python_skip "")
if(NOT EXISTS "${DEEPSHARD_PYTHON}")
  set(ds_python_skip "no interpreter ${DEEPSHARD_PYTHON}")
else()
  execute_process(
    COMMAND "${DEEPSHARD_PYTHON}" -c
            "import os, sysconfig, torch; print(torch.__version__); print(os.path.realpath(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cpu.so'))); print(sysconfig.get_paths()['include'])"
    RESULT_VARIABLE ds_py_rc OUTPUT_VARIABLE ds_py_out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT ds_py_rc EQUAL 0)
    set(ds_python_skip "${DEEPSHARD_PYTHON} cannot import torch (apt-get install python3-torch)")
  endif()
endif()
if(NOT ds_python_skip)
  string(REPLACE "\n" ";" ds_py_out "${ds_py_out}")
  list(GET ds_py_out 0 ds_py_torch_version)
  list(GET ds_py_out 1 ds_py_torch_cpu)
  find_library(ds_torch_cpu_lib torch_cpu PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  find_library(ds_torch_cpu_lib torch_cpu)
  find_library(ds_torch_python_lib torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib")
  get_filename_component(ds_torch_cpu_real "${ds_torch_cpu_lib}" REALPATH)
  set(PYTHON_EXECUTABLE "${DEEPSHARD_PYTHON}")  # pybind11 finds the interpreter through it
  find_package(pybind11 CONFIG QUIET)
  if(NOT ds_py_torch_cpu STREQUAL ds_torch_cpu_real)
    set(ds_python_skip "${DEEPSHARD_PYTHON}'s torch ${ds_py_torch_version} runs ${ds_py_torch_cpu}, "
                       "not this tree's libtorch ${ds_torch_cpu_real}")
  elseif(NOT ds_torch_python_lib OR NOT EXISTS "${TORCH_INSTALL_PREFIX}/include/torch/extension.h")
    set(ds_python_skip "no libtorch_python / torch/extension.h next to ${ds_torch_cpu_real}")
  elseif(NOT pybind11_FOUND)
    set(ds_python_skip "no pybind11 (apt-get install pybind11-dev)")
  endif()
endif()
if(ds_python_skip)
  message(STATUS "Python front-end skipped: ${ds_python_skip}")
  return()
endif()
message(STATUS "Python front-end: ${DEEPSHARD_PYTHON}, torch ${ds_py_torch_version} on "
               "${ds_py_torch_cpu}, pybind11 ${pybind11_VERSION}")

# The layers Engine::initialize reaches (static archives, position-independent like every layer:
# the linker takes the members the extension needs; a layer missing here shows as an undefined
# symbol when the package is imported, which the Python tests do).
set(ds_python_layers ds_util ds_config ds_comm ds_platform ds_io ds_offload ds_sharding ds_kernels
                     ds_optim ds_checkpoint ds_zero)

# The package: its Python files copied into the build tree next to the extension.
set(ds_python_dir ${PROJECT_BINARY_DIR}/python/deepshard)
file(GLOB ds_python_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/deepshard/*.py)
# The module reads the environment's knobs as the executable does (src/cli/process_options.h).
pybind11_add_module(ds_python_ext MODULE src/python/bindings.cpp src/python/ops_bindings.cpp
                    src/cli/process_options.cpp src/cli/environment.cpp)
set_target_properties(ds_python_ext PROPERTIES OUTPUT_NAME _C LIBRARY_OUTPUT_DIRECTORY ${ds_python_dir})
target_include_directories(ds_python_ext PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(ds_python_ext PRIVATE ${ds_python_layers} ${ds_torch_python_lib})
add_custom_target(deepshard_python ALL DEPENDS ds_python_ext SOURCES ${ds_python_files})
add_custom_command(TARGET deepshard_python POST_BUILD
                   COMMAND ${CMAKE_COMMAND} -E copy_if_different ${ds_python_files} ${ds_python_dir})

execute_process(COMMAND "${DEEPSHARD_PYTHON}" -c "import sys; print('%d.%d' % sys.version_info[:2])"
                OUTPUT_VARIABLE ds_py_version OUTPUT_STRIP_TRAILING_WHITESPACE)
# Debian's interpreter searches <prefix>/lib/python3.X/dist-packages for prefix /usr/local.
set(DEEPSHARD_PYTHON_INSTALL_DIR "lib/python${ds_py_version}/dist-packages" CACHE STRING
    "Where cmake --install puts the deepshard package (relative: under the prefix)")
install(FILES ${ds_python_files} DESTINATION ${DEEPSHARD_PYTHON_INSTALL_DIR}/deepshard)
install(TARGETS ds_python_ext LIBRARY DESTINATION ${DEEPSHARD_PYTHON_INSTALL_DIR}/deepshard)
set(DS_PYTHON_ENABLED ON)

# Tests (tests/python): pytest, each test starting real ranks through `deepshard launch` (this
# tree's, or DS_TEST_LAUNCHER's as for the C++ tests).
if(DS_TEST_LAUNCHER)
  set(ds_python_launcher "${DS_TEST_LAUNCHER}")
else()
  set(ds_python_launcher "$<TARGET_FILE:deepshard>")
endif()
set(ds_python_test_env
    "PYTHONPATH=${PROJECT_BINARY_DIR}/python" "DS_EXE=${ds_python_launcher}"
    "DS_PYTHON=${DEEPSHARD_PYTHON}" "PYTHONDONTWRITEBYTECODE=1" "OMP_WAIT_POLICY=PASSIVE")
function(ds_python_test name file)
  add_test(NAME python.${name}
           COMMAND "${DEEPSHARD_PYTHON}" -m pytest -q -s -p no:cacheprovider
                   ${PROJECT_SOURCE_DIR}/tests/python/${file})
  set_tests_properties(python.${name} PROPERTIES ENVIRONMENT "${ds_python_test_env}"
                                                 LABELS dist TIMEOUT 900)
endfunction()
ds_python_test(engine test_engine.py)
ds_python_test(checkpoint test_checkpoint.py)
ds_python_test(zero_init test_zero_init.py)
ds_python_test(launch test_launch.py)
ds_python_test(example test_example.py)
ds_python_test(ops test_ops.py)
