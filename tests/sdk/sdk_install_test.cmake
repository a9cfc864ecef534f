# The SDK end to end, run by ctest as `cmake -P`: install this build into a fresh prefix, build
# plugins/examples against that prefix as a third party would (find_package(Tessera)), check the
# examples export only their entry point, then compile mlp-small for t16 with the INSTALLED
# `tessera` and a pipeline naming both examples, run it on the simulator, and run the examples'
# own tests (the installed `tessera check-plugin` on each, and one linking the installed kit);
# then docs/plugin-guide.md's recipe as written, in a folder under /tmp, and the installed
# calibrated pipeline with and without its table.
cmake_minimum_required(VERSION 3.25)

foreach(required TESSERA_SOURCE_DIR TESSERA_BINARY_DIR WORK_DIR LIBDIR CXX_COMPILER MAKE_PROGRAM CTEST_COMMAND NM)
  if(NOT ${required})
    message(FATAL_ERROR "sdk_install_test.cmake: pass -D${required}=... (see tests/sdk/CMakeLists.txt)")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(examples ${WORK_DIR}/examples)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
string(TIMESTAMP test_started "%s")

# run_step(NAME COMMAND...): runs the command in WORK_DIR, keeps its output in NAME.log, stops
# the test with that output on a non-zero exit, and leaves stdout/stderr in step_out/step_err.
function(run_step name)
  string(TIMESTAMP started "%s")
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP finished "%s")
  math(EXPR seconds "${finished} - ${started}")
  file(WRITE ${WORK_DIR}/${name}.log "${out}\n---- stderr ----\n${err}")
  if(NOT result STREQUAL "0")
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "step '${name}' failed (exit ${result}): ${command}\n${out}\n${err}${step_hint}")
  endif()
  message(STATUS "step ${name}: ok in ${seconds} s")
  set(step_out "${out}" PARENT_SCOPE)
  set(step_err "${err}" PARENT_SCOPE)
endfunction()

# expect(TEXT NEEDLE WHAT): the literal NEEDLE must occur in TEXT.
function(expect text needle what)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: expected to find '${needle}' in:\n${text}")
  endif()
endfunction()

# 1. Install. A file missing from the build tree means the build is not complete.
set(step_hint "\nIs the build complete? Run `cmake --build ${TESSERA_BINARY_DIR}` before ctest.")
run_step(install ${CMAKE_COMMAND} --install ${TESSERA_BINARY_DIR} --prefix ${prefix})
set(step_hint "")
foreach(file bin/tessera include/tessera/plugin.hpp include/tessera/scheduler.hpp include/tessera/cost_model.hpp
        include/tessera/testing/battery.hpp include/tessera/testing/phases.hpp ${LIBDIR}/libtessera_testing.a
        ${LIBDIR}/libtessera_core.so.0 ${LIBDIR}/cmake/Tessera/TesseraConfig.cmake
        ${LIBDIR}/cmake/Tessera/TesseraConfigVersion.cmake ${LIBDIR}/cmake/Tessera/TesseraTargets.cmake
        ${LIBDIR}/cmake/Tessera/TesseraPlugin.cmake lib/tessera/plugins/greedy.so lib/tessera/plugins/analytic.so
        lib/tessera/plugins/lower-mid.so share/tessera/models/mlp-small.yaml share/tessera/targets/t16.yaml
        share/tessera/pipelines/small.yaml share/doc/tessera/plugin-guide.md share/doc/tessera/architecture.md
        share/doc/tessera/examples/CMakeLists.txt share/doc/tessera/examples/example-scheduler/CMakeLists.txt)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "install: ${prefix}/${file} is missing")
  endif()
endforeach()
foreach(link libtessera_core.so libtessera_core.so.0)
  if(NOT IS_SYMLINK ${prefix}/${LIBDIR}/${link})
    message(FATAL_ERROR "install: ${prefix}/${LIBDIR}/${link} should be a SONAME link")
  endif()
endforeach()
# The installed binary must use the installed core, not the build tree's.
run_step(ldd ldd ${prefix}/bin/tessera)
expect("${step_out}" "libtessera_core.so.0 => ${prefix}/" "installed tessera's core library")
# The installed pipelines name their target by name: the installed one.
run_step(installed-pipeline ${prefix}/bin/tessera compile --print-pipeline -p small)
expect("${step_out}" "target: ${prefix}/share/tessera/targets/t16.yaml" "installed small.yaml")

# 2. The examples, as an outside project: the installed copy (share/doc/tessera/examples), and
# only the prefix tells CMake where Tessera is.
set(launcher "")
if(CXX_COMPILER_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
endif()
# The build's own flags (empty but for make test-sanitize): an SDK built with ASan and UBSan
# links only into code built with them, as it would for a third party.
set(flags "")
foreach(kind CXX_FLAGS EXE_LINKER_FLAGS MODULE_LINKER_FLAGS)
  if(${kind})
    list(APPEND flags "-DCMAKE_${kind}=${${kind}}")
  endif()
endforeach()
run_step(configure-examples ${CMAKE_COMMAND} -S ${prefix}/share/doc/tessera/examples -B ${examples} -G Ninja
         -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
         -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${launcher} ${flags})
file(STRINGS ${examples}/CMakeCache.txt tessera_dir REGEX "^Tessera_DIR:")
expect("${tessera_dir}" "=${prefix}/${LIBDIR}/cmake/Tessera" "the examples' Tessera_DIR")
run_step(build-examples ${CMAKE_COMMAND} --build ${examples})
foreach(plugin example-scheduler example-cost-model)
  run_step(nm-${plugin} ${NM} -D --defined-only ${examples}/plugins/${plugin}.so)
  string(REGEX REPLACE "[0-9a-f]+ [A-Za-z] " "" exported "${step_out}")
  string(STRIP "${exported}" exported)
  if(NOT exported STREQUAL "tessera_plugin_manifest")
    message(FATAL_ERROR "${plugin}.so must export only tessera_plugin_manifest; nm -D --defined-only shows:\n${step_out}")
  endif()
endforeach()

# 3. A pipeline naming both examples, compiled and run by the installed binary.
file(WRITE ${WORK_DIR}/examples-pipeline.yaml
"# Written by tests/sdk/sdk_install_test.cmake: the small pipeline with both examples swapped in.
pipeline: sdk-examples
target: ${prefix}/share/tessera/targets/t16.yaml
plugin_paths: [${prefix}/lib/tessera/plugins, ${examples}/plugins]
cost_model: {plugin: example-cost-model, options: {call_overhead_cycles: 40}}
exchange_scheduler: {plugin: example-scheduler, options: {backfill: true}}
passes:
  - {plugin: lower-mid}
  - {plugin: select-finalist, options: {finalists: 2}}
  - {plugin: place-storage}
  - {plugin: lower-exchanges}
  - {plugin: emit-tile-code}
")
run_step(compile ${prefix}/bin/tessera compile ${prefix}/share/tessera/models/mlp-small.yaml
         -p ${WORK_DIR}/examples-pipeline.yaml -t ${prefix}/share/tessera/targets/t16.yaml
         -o ${WORK_DIR}/mlp-small.tpkg -v)
expect("${step_out}" "package=${WORK_DIR}/mlp-small.tpkg tiles=16 " "compile result")
expect("${step_err}" "cost_model=example-cost-model exchange_scheduler=example-scheduler" "compile log")
expect("${step_err}" "selected_kind=\"example-scheduler\"" "compile log")
run_step(run ${prefix}/bin/tessera run ${WORK_DIR}/mlp-small.tpkg --lock ${WORK_DIR}/device.lock)
expect("${step_out}" "numericalTest=PASS" "run result")
run_step(plugins-info ${prefix}/bin/tessera plugins info example-scheduler --plugin-path ${examples}/plugins)
expect("${step_out}" "file: ${examples}/plugins/example-scheduler.so" "plugins info")
expect("${step_out}" "backfill (bool, default true)" "plugins info")

# 4. The examples' own tests: the installed `tessera check-plugin` on each plugin, and
# example-scheduler's test written with the installed test kit (tessera::testing).
run_step(examples-ctest ${CTEST_COMMAND} --test-dir ${examples} --output-on-failure)
expect("${step_out}" "100% tests passed" "examples' ctest")
expect("${step_out}" "test-example-scheduler" "examples' ctest")

# 5. The plugin guide's recipe (docs/plugin-guide.md, steps 6 and 7) as written, with the
# example scheduler for "my-scheduler": in a fresh folder outside the source and build trees,
# copy the installed small.yaml, swap one line, name the plugin folder, compile by names, run.
string(RANDOM LENGTH 8 ALPHABET abcdefghijklmnopqrstuvwxyz0123456789 suffix)
set(recipe /tmp/tessera-plugin-guide-${suffix})
file(MAKE_DIRECTORY ${recipe})
file(CREATE_LINK ${examples} ${recipe}/build SYMBOLIC)  # the guide's project: build/plugins/*.so
file(READ ${TESSERA_SOURCE_DIR}/docs/plugin-guide.md guide)
string(REGEX MATCH "\ncp [$]HOME/tessera/share/tessera/pipelines/small.yaml mine.yaml\n(sed [^\n]*)\n" found "${guide}")
if(NOT found)
  message(FATAL_ERROR "docs/plugin-guide.md no longer shows the cp + sed of step 6; update this test with it")
endif()
set(swap "${CMAKE_MATCH_1}")
string(REPLACE "my-scheduler" "example-scheduler" swap "${swap}")
file(COPY_FILE ${prefix}/share/tessera/pipelines/small.yaml ${recipe}/mine.yaml)
execute_process(COMMAND /bin/sh -c "${swap}" WORKING_DIRECTORY ${recipe} RESULT_VARIABLE result)
if(NOT result STREQUAL "0")
  message(FATAL_ERROR "the guide's sed failed (exit ${result}): ${swap}")
endif()
execute_process(COMMAND ${prefix}/bin/tessera compile mlp-small -p mine.yaml -o small.tpkg -v WORKING_DIRECTORY ${recipe}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result STREQUAL "0")
  message(FATAL_ERROR "the guide's compile failed (exit ${result}) in ${recipe}:\n${out}\n${err}")
endif()
expect("${out}" "package=small.tpkg tiles=16 " "the guide's compile")
expect("${err}" "selected_kind=\"example-scheduler\"" "the guide's compile")
execute_process(COMMAND ${prefix}/bin/tessera run small.tpkg --lock device.lock WORKING_DIRECTORY ${recipe}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
expect("${out}" "numericalTest=PASS" "the guide's run")
# The installed calibrated pipeline: without a table, a clean error when it loads (no plugin
# fault, no reproducer); with the table `tessera calibrate` writes where it looks, a compile.
file(REMOVE ${prefix}/share/tessera/calibration/t16.yaml)  # installed when this build ran `make calibrate`
execute_process(COMMAND ${prefix}/bin/tessera compile mlp-small -p calibrated -t t16 -o cal.tpkg
                WORKING_DIRECTORY ${recipe} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result STREQUAL "1" OR EXISTS ${recipe}/reproducers)
  message(FATAL_ERROR "installed calibrated.yaml without a table: expected exit 1 and no reproducer, got ${result}:\n${err}")
endif()
expect("${err}" "calibration table ${prefix}/share/tessera/calibration/t16.yaml not found" "calibrated without a table")
run_step(calibrate ${prefix}/bin/tessera calibrate -t t16 -o ${prefix}/share/tessera/calibration/t16.yaml)
execute_process(COMMAND ${prefix}/bin/tessera compile mlp-small -p calibrated -t t16 -o cal.tpkg
                WORKING_DIRECTORY ${recipe} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
expect("${out}" "package=cal.tpkg tiles=16 " "installed calibrated.yaml with its table")
file(REMOVE_RECURSE ${recipe})
message(STATUS "step plugin-guide-recipe: ok")

string(TIMESTAMP test_finished "%s")
math(EXPR total "${test_finished} - ${test_started}")
message(STATUS "sdk install test passed in ${total} s (logs in ${WORK_DIR})")
