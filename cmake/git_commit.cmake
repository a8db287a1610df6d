# Writes OUTPUT, the C++ source that defines lenet5::git_commit() (src/core/version.hpp): COMMIT
# when it is given, else the short hash of SOURCE_DIR's HEAD, else "unknown". Run by every build:
#   cmake -DSOURCE_DIR=... -DOUTPUT=... [-DCOMMIT=<hash>] -P git_commit.cmake
# The file is rewritten only when its text changes, so a build whose commit has not moved compiles
# nothing again.
if(NOT COMMIT)
  execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(NOT COMMIT)
  set(COMMIT "unknown")
endif()
set(text "// Written by cmake/git_commit.cmake: the commit this build compiled.
#include \"core/version.hpp\"

const char* lenet5::git_commit() { return \"${COMMIT}\"; }
")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
