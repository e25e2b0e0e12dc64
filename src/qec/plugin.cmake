# SPDX-License-Identifier: MIT
# qlink-qec.so: the surface-code decoder as a qlinkd plugin serving CUDA-Q
# QEC's decoder functions (src/qec/plugin.c, docs/qec.md "Over the wire").
# A MODULE carrying its own copy of what it needs of libqlink (the static
# library's position-independent objects, hidden), so qlinkd (which exports
# nothing) loads it from any path; plugin.map exports ql_plugin_info alone
# and -z defs proves nothing else is needed at run time. Installed under
# LIBDIR/qlink/plugins/.
add_library(qlink_qec_plugin MODULE ${CMAKE_CURRENT_LIST_DIR}/plugin.c)
set_target_properties(qlink_qec_plugin PROPERTIES
  OUTPUT_NAME qlink-qec PREFIX ""
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/plugins
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/plugin.map)
target_link_libraries(qlink_qec_plugin PRIVATE qlink_static Threads::Threads m)
target_link_options(qlink_qec_plugin PRIVATE
  -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/plugin.map -Wl,-z,defs
  -Wl,--exclude-libs,ALL)
install(TARGETS qlink_qec_plugin LIBRARY DESTINATION ${QLINK_PLUGINDIR} COMPONENT runtime)
