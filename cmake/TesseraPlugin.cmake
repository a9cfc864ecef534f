# tessera_add_plugin(NAME SOURCES ... [OUTPUT_DIRECTORY DIR]): a plugin module that links
# the core and exports only its entry point. The library file is NAME.so in the plugin
# output folder (or DIR: test plugins keep out of the default search path).
#
# The same file serves the main build and, installed as lib/cmake/Tessera/TesseraPlugin.cmake,
# out-of-tree projects that call find_package(Tessera). There the default output folder is
# <build>/plugins and the target is tessera_plugin_NAME, to install as the project likes.
function(tessera_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "tessera_add_plugin(${name}): no SOURCES given")
  endif()
  set(default_output OFF)
  if(NOT ARG_OUTPUT_DIRECTORY)
    set(default_output ON)
    if(TESSERA_PLUGIN_OUTPUT_DIR)
      set(ARG_OUTPUT_DIRECTORY ${TESSERA_PLUGIN_OUTPUT_DIR})
    else()
      set(ARG_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/plugins)
    endif()
  endif()
  set(target tessera_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE tessera::core)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${name}
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  # Hidden visibility does not hide the standard library's template instantiations (namespace
  # std is declared with default visibility), so a version script keeps everything but the
  # entry point local: two plugins can then never interpose each other's symbols.
  set(export_map ${CMAKE_BINARY_DIR}/tessera_plugin_exports.map)
  file(CONFIGURE OUTPUT ${export_map}
       CONTENT "{\n  global: tessera_plugin_manifest;\n  local: *;\n};\n")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${export_map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${export_map})
  # In the main build, shipped plugins install beside the `tessera` binary's lookup path.
  if(default_output AND DEFINED TESSERA_INSTALL_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "${TESSERA_INSTALL_PLUGIN_RPATH}")
    install(TARGETS ${target} LIBRARY DESTINATION ${TESSERA_INSTALL_PLUGIN_DIR} COMPONENT runtime)
  endif()
endfunction()
