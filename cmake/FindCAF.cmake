# Finds CAF 0.17 as Debian's libcaf-dev installs it (no CMake package ships with it).
# Defines the imported targets CAF::core and CAF::io.
find_package(Threads REQUIRED)
find_path(CAF_INCLUDE_DIR NAMES caf/all.hpp caf/config.hpp)
find_library(CAF_CORE_LIBRARY NAMES caf_core)
find_library(CAF_IO_LIBRARY NAMES caf_io)
if(CAF_INCLUDE_DIR)
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" CAF_VERSION_NUMBER
                       "${_caf_version_line}")
  math(EXPR _major "${CAF_VERSION_NUMBER} / 10000")
  math(EXPR _minor "(${CAF_VERSION_NUMBER} / 100) % 100")
  math(EXPR _patch "${CAF_VERSION_NUMBER} % 100")
  set(CAF_VERSION "${_major}.${_minor}.${_patch}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)
if(CAF_FOUND)
  if(CAF_VERSION VERSION_LESS 0.17 OR NOT CAF_VERSION VERSION_LESS 0.18)
    message(FATAL_ERROR "Troupe needs CAF 0.17.x, found ${CAF_VERSION}")
  endif()
  if(NOT TARGET CAF::core)
    add_library(CAF::core UNKNOWN IMPORTED)
    set_target_properties(CAF::core PROPERTIES
      IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES Threads::Threads)
    add_library(CAF::io UNKNOWN IMPORTED)
    set_target_properties(CAF::io PROPERTIES
      IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
      INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
endif()
