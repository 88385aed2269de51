# `cmake --install`: the public headers, the two libraries, the troupe command, the CMake
# package (find_package(troupe CONFIG) gives troupe::client and troupe::node), a pkg-config file
# for the producer library, and the license.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TROUPE_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/troupe")

install(DIRECTORY runtime/include/troupe DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp")
install(FILES "${TROUPE_GENERATED}/include/troupe/version.hpp"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/troupe")
install(TARGETS troupe_client troupe_node troupe_testing EXPORT troupeTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS troupe RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(EXPORT troupeTargets NAMESPACE troupe:: DESTINATION "${TROUPE_CMAKE_DIR}")

configure_package_config_file(cmake/troupeConfig.cmake.in
  "${CMAKE_BINARY_DIR}/package/troupeConfig.cmake" INSTALL_DESTINATION "${TROUPE_CMAKE_DIR}")
write_basic_package_version_file("${CMAKE_BINARY_DIR}/package/troupeConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/package/troupeConfig.cmake"
              "${CMAKE_BINARY_DIR}/package/troupeConfigVersion.cmake" cmake/FindCAF.cmake
        DESTINATION "${TROUPE_CMAKE_DIR}")

# Relocatable: the prefix is found from where the .pc file lies.
file(RELATIVE_PATH TROUPE_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" TROUPE_PC_TO_PREFIX "${TROUPE_PC_TO_PREFIX}")
configure_file(cmake/troupe.pc.in "${CMAKE_BINARY_DIR}/package/troupe.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/package/troupe.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

install(FILES LICENSE CHANGELOG.md DESTINATION "${CMAKE_INSTALL_DOCDIR}")
