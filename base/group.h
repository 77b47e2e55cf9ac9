// Unix group sharing of data files (`--group NAME`): resolve a group the
// caller may give files to, and give a file or directory to it.
#ifndef ZEROVEC_BASE_GROUP_H_
#define ZEROVEC_BASE_GROUP_H_

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "base/status.h"

namespace zv {

// The gid of `name`. INVALID_ARGUMENT if no such group exists;
// PERMISSION_DENIED if the caller is not in it (only root may chgrp files to a
// group it is not in).
StatusOr<gid_t> ResolveGroup(const std::string& name);

// chgrp `path` to `gid` and chmod it: directories 02750 (setgid, so what is
// created inside inherits the group), files 0640. Symlinks are left alone.
Status ShareWithGroup(const std::filesystem::path& path, gid_t gid);

}  // namespace zv

#endif  // ZEROVEC_BASE_GROUP_H_
