# SPDX-License-Identifier: MIT
# What `cmake --install` puts where (GNUInstallDirs):
#
#   lib/libqlink.so.0.1.0 (+ .so.0, .so), lib/libqlink.a,
#   lib/libqlink-control.so..., lib/libqlink-control.a
#   lib/libcudaq-realtime-bridge-qlink.so (the CUDA-Q Realtime bridge provider,
#     a dlopen'ed module: docs/cudaq-bridge.md)
#   include/qlink/*.h (the public headers, qlink/version.h generated)
#   bin/qlink, sbin/qlinkd
#   lib/pkgconfig/qlink.pc, lib/pkgconfig/qlink-control.pc
#   lib/cmake/qlink/qlinkConfig.cmake (+ Version, Targets): find_package(qlink)
#     with targets qlink::qlink, qlink::qlink_static, qlink::control,
#     qlink::control_static
#   share/man/man1/qlink.1, man5/qlinkd.yaml.5, man8/qlinkd.8, and the API
#     reference man3/ql_<header>.3 (one page per public header, with the
#     headers: component devel)
#   share/doc/qlink/ (README, docs/*.md), share/doc/qlink/examples/
#   lib/qlink/plugins/ (plugin_decoder.so, plugin_host_call.so, qlink-qec.so)
#   etc/qlink/qlinkd.yaml (kept if present), lib/systemd/system/qlinkd.service
include(CMakePackageConfigHelpers)

set_target_properties(qlink PROPERTIES EXPORT_NAME qlink)
set_target_properties(qlink_static PROPERTIES EXPORT_NAME qlink_static)
set_target_properties(qlink_control PROPERTIES EXPORT_NAME control)
set_target_properties(qlink_control_static PROPERTIES EXPORT_NAME control_static)
set_target_properties(ql_ibverbs PROPERTIES EXPORT_NAME ibverbs)
set_target_properties(ql_control_deps PROPERTIES EXPORT_NAME control_deps)

install(TARGETS qlink qlink_static qlink_control qlink_control_static ql_ibverbs ql_control_deps
        EXPORT qlinkTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# the CUDA-Q bridge provider: a module, not in the exported CMake targets
# (nothing links it; CUDA-Q dlopen()s it by path or name)
install(TARGETS cudaq_bridge_qlink LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/qlink DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT devel FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/qlink/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qlink COMPONENT devel)

set(QL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/qlink)
install(EXPORT qlinkTargets NAMESPACE qlink:: DESTINATION ${QL_CMAKE_DIR} COMPONENT devel)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qlinkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/qlinkConfig.cmake INSTALL_DESTINATION ${QL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/qlinkConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/qlinkConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/qlinkConfigVersion.cmake
        DESTINATION ${QL_CMAKE_DIR} COMPONENT devel)

# pkg-config: written at install time, so that the prefix in the file is
# the one installed to (cmake --install --prefix P changes it after
# configure). A prefix with spaces is written with backslash escapes, which
# pkg-config keeps in its shell-quoted output.
install(CODE "
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  string(REPLACE \" \" \"\\\\ \" QL_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  foreach(d LIBDIR INCLUDEDIR)
    if(d STREQUAL LIBDIR)
      set(v \"${CMAKE_INSTALL_LIBDIR}\")
    else()
      set(v \"${CMAKE_INSTALL_INCLUDEDIR}\")
    endif()
    if(IS_ABSOLUTE \"\${v}\")
      string(REPLACE \" \" \"\\\\ \" QL_PC_\${d} \"\${v}\")
    else()
      set(QL_PC_\${d} \"\\\${prefix}/\${v}\")
    endif()
  endforeach()
  foreach(pc qlink qlink-control)
    configure_file(\"${PROJECT_SOURCE_DIR}/cmake/\${pc}.pc.in\"
                   \"${PROJECT_BINARY_DIR}/pkgconfig/\${pc}.pc\" @ONLY)
  endforeach()
  file(INSTALL \"${PROJECT_BINARY_DIR}/pkgconfig/qlink.pc\"
                \"${PROJECT_BINARY_DIR}/pkgconfig/qlink-control.pc\"
       DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
" COMPONENT devel)

install(TARGETS qlink-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS qlink-epgen RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS qlinkd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT runtime)

install(FILES ${PROJECT_SOURCE_DIR}/man/qlink.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/man/qlink-epgen.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/man/qlinkd.yaml.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5
        COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/man/qlinkd.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8
        COMPONENT runtime)
# the API reference (scripts/gen-man3.sh writes man/man3 from the headers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/man/man3/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man3
        COMPONENT devel FILES_MATCHING PATTERN "ql_*.3")

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc
        FILES_MATCHING PATTERN "*.md")
install(FILES ${PROJECT_SOURCE_DIR}/examples/qlinkd.yaml ${PROJECT_SOURCE_DIR}/examples/program.yaml
              ${PROJECT_SOURCE_DIR}/examples/verbs_hello.c
              ${PROJECT_SOURCE_DIR}/examples/plugin_decoder.c
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT doc)

# ---- qlinkd as a service (docs/qlinkd.md, "Running as a service") ----------
# LIBDIR/qlink/plugins: the example plugins (examples/CMakeLists.txt) and
# qlink-qec.so. SYSCONFDIR/qlink/qlinkd.yaml (/etc/qlink/qlinkd.yaml for
# the prefix /usr): the commented example configuration, installed only
# where none exists (an operator's file is never overwritten). The systemd
# unit, in QLINK_SYSTEMD_UNITDIR (relative: under the prefix), written at
# install time with the paths of the prefix installed to.
set(QLINK_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING
    "where qlinkd.service is installed (relative: under the prefix)")
install(CODE "
  if(\"\${CMAKE_INSTALL_PREFIX}\" STREQUAL \"/usr\")
    set(QLINKD_ETC /etc/qlink) # GNUInstallDirs' rule for the prefix /usr
  elseif(IS_ABSOLUTE \"${CMAKE_INSTALL_SYSCONFDIR}\")
    set(QLINKD_ETC \"${CMAKE_INSTALL_SYSCONFDIR}/qlink\")
  else()
    set(QLINKD_ETC \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SYSCONFDIR}/qlink\")
  endif()
  if(IS_ABSOLUTE \"${CMAKE_INSTALL_SBINDIR}\")
    set(QLINKD_SBIN \"${CMAKE_INSTALL_SBINDIR}\")
  else()
    set(QLINKD_SBIN \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}\")
  endif()
  if(IS_ABSOLUTE \"${QLINK_SYSTEMD_UNITDIR}\")
    set(QLINKD_UNITDIR \"${QLINK_SYSTEMD_UNITDIR}\")
  else()
    set(QLINKD_UNITDIR \"\${CMAKE_INSTALL_PREFIX}/${QLINK_SYSTEMD_UNITDIR}\")
  endif()
  set(QLINKD_CONFIG \"\${QLINKD_ETC}/qlinkd.yaml\")
  if(EXISTS \"\$ENV{DESTDIR}\${QLINKD_CONFIG}\")
    message(STATUS \"Kept: \$ENV{DESTDIR}\${QLINKD_CONFIG} (not overwritten)\")
  else()
    file(INSTALL \"${PROJECT_SOURCE_DIR}/examples/qlinkd.yaml\" DESTINATION \"\${QLINKD_ETC}\")
  endif()
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/qlinkd.service.in\"
                 \"${PROJECT_BINARY_DIR}/systemd/qlinkd.service\" @ONLY)
  file(INSTALL \"${PROJECT_BINARY_DIR}/systemd/qlinkd.service\" DESTINATION \"\${QLINKD_UNITDIR}\")
" COMPONENT runtime)
