# The layering check (a CTest test, `ctest -R Layering`): every file of a layer includes only
# headers of the layers it may depend on (the DEPS of ds_layer in CMakeLists.txt, transitively),
# public ("deepshard/<layer>/...") and private ("<layer>/..." under src/) alike, in every subfolder
# (an architecture's src/models/<arch>/). zero neither links nor includes models (models are users
# of the sharding API, never known to zero); checkpoint knows no model either. Public headers
# include only public headers, and there are at most 25 of them.
#   cmake -DSOURCE_DIR=<repository> -P cmake/check_layering.cmake
cmake_minimum_required(VERSION 3.20)
set(allowed_util util)
set(allowed_config util config)
set(allowed_comm util config comm)
set(allowed_platform util platform)
set(allowed_launch util platform launch)
set(allowed_io util io)
set(allowed_offload util io offload)
set(allowed_data util data)
set(allowed_sharding util sharding)
set(allowed_kernels util platform kernels)
set(allowed_activation util config comm activation)
set(allowed_models util config comm platform sharding activation kernels checkpoint models)
set(allowed_optim util config platform optim)
set(allowed_checkpoint util checkpoint)
set(allowed_zero util config comm platform io offload optim sharding checkpoint kernels zero)
set(allowed_parallel util config comm sharding activation kernels checkpoint models parallel)
set(allowed_monitor util monitor)
set(allowed_profiling util profiling)
set(allowed_train util config comm platform io offload data sharding kernels activation models optim
    checkpoint zero parallel monitor profiling train)
set(allowed_autotune util config comm platform io offload launch data sharding kernels activation
    models optim checkpoint zero parallel monitor profiling train autotune)
set(allowed_cli util config comm platform io offload launch data sharding kernels activation models
    optim checkpoint zero parallel monitor profiling train autotune cli)
set(layers util config comm platform launch io offload data sharding kernels activation models optim
    checkpoint zero parallel monitor profiling train autotune cli)

set(problems "")
foreach(layer ${layers})
  file(GLOB_RECURSE files ${SOURCE_DIR}/include/deepshard/${layer}/*.h
       ${SOURCE_DIR}/src/${layer}/*.h ${SOURCE_DIR}/src/${layer}/*.cpp)
  foreach(f ${files})
    file(STRINGS ${f} includes REGEX "^#include [\"<]")
    foreach(line ${includes})
      # "deepshard/<layer>/x.h" (public) or "<layer>/x.h" (private, src/).
      if(line MATCHES "^#include [\"<]deepshard/([a-z_]+)/")
        set(dep ${CMAKE_MATCH_1})
      elseif(line MATCHES "^#include \"([a-z_]+)/")
        set(dep ${CMAKE_MATCH_1})
        if(NOT dep IN_LIST layers)
          continue()
        endif()
      else()
        continue()
      endif()
      if(NOT dep IN_LIST allowed_${layer})
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
        string(APPEND problems "\n  ${rel}: ${line} (layer ${layer} may include: ${allowed_${layer}})")
      endif()
    endforeach()
  endforeach()
endforeach()
# The public headers (include/deepshard/) are what users call: they include only each other, so
# an installed package needs nothing of src/, and they stay few.
set(max_public_headers 25)
file(GLOB_RECURSE public_headers ${SOURCE_DIR}/include/deepshard/*.h)
list(LENGTH public_headers public_count)
if(public_count GREATER max_public_headers)
  string(APPEND problems "\n  include/deepshard/ has ${public_count} headers (at most "
         "${max_public_headers}: what users call; the rest belongs under src/)")
endif()
foreach(f ${public_headers})
  file(STRINGS ${f} includes REGEX "^#include \"[a-z_]+/")
  foreach(line ${includes})
    if(line MATCHES "^#include \"([a-z_]+)/" AND CMAKE_MATCH_1 IN_LIST layers)
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
      string(APPEND problems "\n  ${rel}: ${line} (a public header includes only public headers)")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "layering violations:${problems}")
endif()
message(STATUS "layering: every include points to an allowed layer; ${public_count} public headers")
