# Registers one CTest test per googletest suite of a test binary (run with cmake -P after the
# binary is built): the test is named after the suite and runs `EXE --gtest_filter=Suite.*`, so a
# suite's tests share one process. Every process of a test binary linked with libtorch spends about
# 0.45 s of CPU registering libtorch's operators before main() (measured with perf on the 2-core
# machine, docs/reliability.md): one process per suite instead of one per test saves that for
# about 580 of the 800 tests.
# Inputs: EXE (the binary), OUT (the CTest script written), LABEL, TIMEOUT (seconds per suite).
# A failing test still names itself: googletest prints each test's result in the suite's output.
# In the sanitizer trees (scripts/sanitize.sh) listing must not fail on what the sanitizers find
# in libtorch's start-up and exit: their passes run the binaries themselves, with their options.
set(ENV{ASAN_OPTIONS} "detect_leaks=0")
set(ENV{TSAN_OPTIONS} "report_bugs=0")
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing
                RESULT_VARIABLE status ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "gtest_suites: ${EXE} --gtest_list_tests failed (${status}):\n${errors}")
endif()
set(script "")
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  # Suite lines start in column 0 and end with '.'; a typed or parameterized suite carries a
  # comment ("Prefix/Suite.  # TypeParam = ...").
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.( *#.*)?$")
    set(suite "${CMAKE_MATCH_1}")
    string(APPEND script
           "add_test([==[${suite}]==] [==[${EXE}]==] [==[--gtest_filter=${suite}.*]==])\n"
           "set_tests_properties([==[${suite}]==] PROPERTIES TIMEOUT ${TIMEOUT} LABELS ${LABEL}"
           " ENVIRONMENT OMP_WAIT_POLICY=PASSIVE)\n")
  endif()
endforeach()
file(WRITE "${OUT}" "${script}")
