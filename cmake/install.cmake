# What `cmake --install` puts under the prefix: the public headers, the two
# libraries, the strata program, the docs, a CMake package
# (find_package(strata CONFIG): strata::strata, strata::apps) and
# pkg-config files (strata, strata-apps).
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/strata ${PROJECT_BINARY_DIR}/include/strata
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/apps/include/strata/apps
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata FILES_MATCHING PATTERN "*.h")
install(TARGETS libstrata strata_apps EXPORT strataTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS strata_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(a ${STRATA_USER_APPS})
  install(TARGETS strata_${a} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The examples' sources only (a user may have built one in place).
foreach(ex ${STRATA_EXAMPLE_NAMES})
  install(FILES ${PROJECT_SOURCE_DIR}/examples/${ex}/CMakeLists.txt ${PROJECT_SOURCE_DIR}/examples/${ex}/${ex}.c
          DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/${ex})
endforeach()

set(STRATA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
install(EXPORT strataTargets NAMESPACE strata:: DESTINATION ${STRATA_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/strataConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/strataConfig.cmake
                              INSTALL_DESTINATION ${STRATA_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/strataConfig.cmake ${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
        DESTINATION ${STRATA_CMAKE_DIR})

# pkg-config: relocatable (paths from the .pc file's own place). libstrata
# is static, so its dependencies are in Libs and Requires, not in the
# .private fields: plain --libs links, and so does --static.
file(RELATIVE_PATH STRATA_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" STRATA_PC_TO_PREFIX "${STRATA_PC_TO_PREFIX}")
set(STRATA_PC_LIBEV ${LIBEV_LIBRARY})
if(NOT STRATA_PC_LIBEV MATCHES "\\.a$")
  set(STRATA_PC_LIBEV -lev)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/strata.pc.in ${PROJECT_BINARY_DIR}/strata.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/strata-apps.pc.in ${PROJECT_BINARY_DIR}/strata-apps.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/strata.pc ${PROJECT_BINARY_DIR}/strata-apps.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
