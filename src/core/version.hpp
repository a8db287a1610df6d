// The program's version and the commit it was built from: what `lenet5 --version` prints and what
// benchmark records name, so that every figure can be traced to the code that produced it.
#pragma once

namespace lenet5 {

// The short hash of the commit the build compiled: "unknown" outside a git tree, unless the build
// was configured with -DLENET5_GIT_COMMIT=<hash>. Defined in a source that every build writes
// again when the commit has moved (cmake/git_commit.cmake), so a build after a new commit names it
// without configuring again.
const char* git_commit();

}  // namespace lenet5
