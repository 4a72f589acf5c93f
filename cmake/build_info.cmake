# Run at every build (cmake -P): writes the build identity header, touching
# it only when the git revision changed, so metrics never carry a stale one.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE STRATA_GIT_REV OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT STRATA_GIT_REV)
  set(STRATA_GIT_REV "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE DIRTY OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(DIRTY)
  set(STRATA_GIT_REV "${STRATA_GIT_REV}-dirty")
endif()
set(PROJECT_VERSION ${VERSION})
set(STRATA_FLAGS_STR ${FLAGS})
set(CMAKE_C_COMPILER_ID ${COMPILER_ID})
set(CMAKE_C_COMPILER_VERSION ${COMPILER_VERSION})
configure_file(${SRC}/core/build_info.h.in ${OUT} @ONLY)
