# tessera_add_test(NAME SOURCES ... [LIBRARIES ...]): a Catch2 test executable run by CTest.
# Tests see TESSERA_SOURCE_DIR, TESSERA_PLUGIN_DIR and TESSERA_BINARY_DIR as string macros.
function(tessera_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  # Without TESSERA_TESTS the target exists (callers add dependencies to it) but is not built.
  if(TESSERA_TESTS)
    add_executable(${name} ${ARG_SOURCES})
  else()
    add_executable(${name} EXCLUDE_FROM_ALL ${ARG_SOURCES})
  endif()
  # Tests are host-side: they load plugins, so they link the driver (and through it the SDK).
  target_link_libraries(${name} PRIVATE tessera_test_main tessera::driver ${ARG_LIBRARIES})
  if(NOT TESSERA_TESTS)
    return()
  endif()
  add_test(NAME ${name} COMMAND ${name})
  # A test's `tessera ab` sweeps add to a history database in the build tree, not the user's own.
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "TESSERA_PLUGIN_PATH=;XDG_DATA_HOME=${CMAKE_BINARY_DIR}/test-data-home")
endfunction()
