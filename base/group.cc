#include "base/group.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace zv {

StatusOr<gid_t> ResolveGroup(const std::string& name) {
  struct group grp {};
  struct group* result = nullptr;
  std::vector<char> buf(16384);
  int err;
  while ((err = ::getgrnam_r(name.c_str(), &grp, buf.data(), buf.size(),
                             &result)) == ERANGE) {
    buf.resize(buf.size() * 2);
  }
  if (err != 0 || result == nullptr) {
    return InvalidArgumentError("group '" + name + "' does not exist");
  }
  const gid_t gid = grp.gr_gid;
  if (::geteuid() == 0 || ::getegid() == gid) return gid;
  const int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(std::max(n, 0));
  if (n > 0 && ::getgroups(n, groups.data()) == n &&
      std::find(groups.begin(), groups.end(), gid) != groups.end()) {
    return gid;
  }
  return PermissionDeniedError("not a member of group '" + name + "' (uid " +
                               std::to_string(::geteuid()) +
                               "), so files cannot be given to it");
}

Status ShareWithGroup(const std::filesystem::path& path, gid_t gid) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return ErrnoError(errno, path.string());
  if (S_ISLNK(st.st_mode)) return OkStatus();
  // chgrp before chmod: a chown may clear the setgid bit.
  if (st.st_gid != gid &&
      ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return ErrnoError(errno, "chgrp " + path.string());
  }
  const mode_t mode = S_ISDIR(st.st_mode) ? 02750 : 0640;
  if (::chmod(path.c_str(), mode) != 0) {
    return ErrnoError(errno, "chmod " + path.string());
  }
  return OkStatus();
}

}  // namespace zv
