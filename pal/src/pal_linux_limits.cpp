// pal on Linux, the posix-generic build too (macOS's and FreeBSD's calls do not exist there): the
// readers of /proc and /sys files, the resident set, the memory cgroup's limit, the machine's
// memory and the address space in use.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/vfs.h>  // statfs
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "pal_posix_internal.hpp"

namespace reservoir::pal {

// ---- file readers ------------------------------------------------------------------------------

bool detail::read_proc_kib_fields(const char* path, const KibField* fields,
                                  std::size_t count) noexcept {
  const CancellationOff no_cancel;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  std::size_t len = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + len, sizeof(buf) - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
    if (len == sizeof(buf) - 1) break;
  }
  (void)::close(fd);  // a read-only file: nothing is lost if close reports an error
  buf[len] = '\0';
  for (const KibField* f = fields; f != fields + count; ++f) {
    const std::size_t key_len = std::strlen(f->key);
    for (const char* line = buf; line && *line;) {
      if (std::strncmp(line, f->key, key_len) == 0 && line[key_len] == ':') {
        *f->value = static_cast<std::size_t>(std::strtoull(line + key_len + 1, nullptr, 10)) * 1024;
        break;
      }
      line = std::strchr(line, '\n');
      if (line) ++line;
    }
  }
  return true;
}

std::size_t detail::read_proc_kib(const char* path, const char* key) noexcept {
  std::size_t value = 0;
  const KibField field{key, &value};
  (void)read_proc_kib_fields(path, &field, 1);  // unread: 0
  return value;
}

bool detail::read_small_file(const char* path, char* buf, std::size_t size) noexcept {
  const CancellationOff no_cancel;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n;
  do {
    n = ::read(fd, buf, size - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

// ---- resident memory ---------------------------------------------------------------------------

std::size_t current_rss() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  return read_proc_kib("/proc/self/status", "VmRSS");
}

// ---- memory limits -----------------------------------------------------------------------------

namespace {

// The whole of a small file (/proc, cgroupfs), or "" if it cannot be read. A file that is there
// but cannot be read now (no descriptor or memory left: EMFILE, ENFILE, ENOMEM) sets *failed; a
// file that does not exist, or may not be read, leaves it.
std::string read_small_file(const std::string& path, bool* failed) {
  const CancellationOff no_cancel;
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) *failed = true;
    return out;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) *failed = true;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// A cgroup file holding one number ("max" or a v1 value near 2^63 mean: no limit).
bool read_limit_value(const std::string& path, std::size_t* out, bool* failed) {
  const std::string text = read_small_file(path, failed);
  if (text.empty() || text.compare(0, 3, "max") == 0) return false;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (v >= (1ull << 62)) return false;
  *out = static_cast<std::size_t>(v);
  return true;
}

std::size_t stat_value(const std::string& stat, const char* key) {
  const std::string k = std::string(key) + " ";
  for (std::size_t at = 0; at < stat.size();) {
    if (stat.compare(at, k.size(), k) == 0) {
      return static_cast<std::size_t>(std::strtoull(stat.c_str() + at + k.size(), nullptr, 10));
    }
    at = stat.find('\n', at);
    if (at == std::string::npos) break;
    ++at;
  }
  return 0;
}

// Where the memory controller is mounted and this process's cgroup under it.
struct CgroupDir {
  std::string mount;  // e.g. /sys/fs/cgroup or /sys/fs/cgroup/memory
  std::string path;   // the cgroup, relative to the mount ("/" or "/a/b")
  bool v2 = false;
};

// Calls f(line) for each line of text.
template <class F>
void for_each_line(const std::string& text, F f) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    f(text.substr(at, end - at));
    at = end + 1;
  }
}

// The file system type of `path` as statfs says (0 where it cannot say).
unsigned long fs_type(const char* path) noexcept {
  struct statfs fs{};
  return ::statfs(path, &fs) == 0 ? static_cast<unsigned long>(fs.f_type) : 0;
}

// The memory controller where systemd, Docker and every mainstream distribution mount it: v1's at
// /sys/fs/cgroup/memory (a cgroup file system holding memory.limit_in_bytes), else v2's at
// /sys/fs/cgroup (a cgroup2 file system whose cgroup.controllers lists memory). A statfs or two
// instead of parsing /proc/self/mountinfo, whose generation costs more than every other file the
// limit check reads together; false: look there. Throws what std::string throws.
bool conventional_memory_mounts(std::string* v1_mount, std::string* v2_mount) {
  constexpr unsigned long kCgroupMagic = 0x27e0eb, kCgroup2Magic = 0x63677270;
  if (fs_type("/sys/fs/cgroup/memory") == kCgroupMagic &&
      ::access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0) {
    *v1_mount = "/sys/fs/cgroup/memory";
    return true;
  }
  if (fs_type("/sys/fs/cgroup") == kCgroup2Magic) {
    bool failed = false;  // unread: mountinfo decides
    const std::string controllers = read_small_file("/sys/fs/cgroup/cgroup.controllers", &failed);
    if (controllers.find("memory") == std::string::npos) return false;
    *v2_mount = "/sys/fs/cgroup";
    return true;
  }
  return false;
}

bool find_memory_cgroup(CgroupDir* out, bool* failed) {
  // 1. Mount points: a cgroup2 mount, or a v1 cgroup mount whose options name "memory".
  std::string v1_mount, v2_mount;
  if (testing::conventional_cgroup_mounts_skipped() ||
      !conventional_memory_mounts(&v1_mount, &v2_mount))
    for_each_line(read_small_file("/proc/self/mountinfo", failed), [&](const std::string& line) {
      // "id parent major:minor root mountpoint options ... - fstype source superoptions"
      const std::size_t dash = line.find(" - ");
      if (dash == std::string::npos) return;
      std::size_t f = 0;
      std::string fields[5];
      for (int i = 0; i < 5 && f < dash; ++i) {
        const std::size_t sp = line.find(' ', f);
        fields[i] = line.substr(f, (sp == std::string::npos ? dash : sp) - f);
        f = sp == std::string::npos ? dash : sp + 1;
      }
      const std::string tail = line.substr(dash + 3);
      if (tail.compare(0, 8, "cgroup2 ") == 0) {
        if (v2_mount.empty()) v2_mount = fields[4];
      } else if (tail.compare(0, 7, "cgroup ") == 0) {
        const std::string super = tail.substr(tail.rfind(' ') + 1);
        if (("," + super + ",").find(",memory,") != std::string::npos) v1_mount = fields[4];
      }
    });
  // 2. This process's cgroup: "N:memory:/path" (v1) or "0::/path" (v2).
  std::string v1_path, v2_path;
  for_each_line(read_small_file("/proc/self/cgroup", failed), [&](const std::string& line) {
    const std::size_t c1 = line.find(':');
    const std::size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) return;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    if (controllers.empty()) {
      v2_path = line.substr(c2 + 1);
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      v1_path = line.substr(c2 + 1);
    }
  });
  // 3. v1's memory controller wins where it is mounted (hybrid systems mount an empty v2 too).
  if (!v1_mount.empty() && !v1_path.empty()) {
    *out = {v1_mount, v1_path, false};
    return true;
  }
  if (!v2_mount.empty() && !v2_path.empty()) {
    *out = {v2_mount, v2_path, true};
    return true;
  }
  return false;
}

}  // namespace

bool memory_limit(MemoryLimit* out) noexcept {
  out->unreadable = false;
  if (std::error_code ec; injected_failure(Op::stats, &ec)) {
    out->unreadable = true;
    return false;
  }
  // A file that could not be read (descriptors or memory ran out) may have held the tightest
  // limit: then nothing found is reported as found, and the caller knows it did not learn.
  bool failed = false;
  try {
    CgroupDir dir;
    if (!find_memory_cgroup(&dir, &failed)) {
      out->unreadable = failed;
      return false;
    }
    // The cgroup and each ancestor up to the mount: the level with the least headroom decides.
    bool found = false;
    std::size_t best_headroom = 0;
    std::string path = dir.path;
    for (;;) {
      const std::string base = dir.mount + (path == "/" ? "" : path) + "/";
      std::size_t limit = 0;
      if (read_limit_value(base + (dir.v2 ? "memory.max" : "memory.limit_in_bytes"), &limit,
                           &failed)) {
        std::size_t usage = 0;
        const std::string usage_file = base + (dir.v2 ? "memory.current" : "memory.usage_in_bytes");
        const std::string usage_text = read_small_file(usage_file, &failed);
        if (!usage_text.empty()) {
          usage = static_cast<std::size_t>(std::strtoull(usage_text.c_str(), nullptr, 10));
          const std::string stat = read_small_file(base + "memory.stat", &failed);
          const std::size_t inactive =
              stat_value(stat, dir.v2 ? "inactive_file" : "total_inactive_file");
          usage = inactive < usage ? usage - inactive : 0;
          const std::size_t headroom = usage < limit ? limit - usage : 0;
          if (!found || headroom < best_headroom) {
            found = true;
            best_headroom = headroom;
            out->limit = limit;
            out->usage = usage;
            out->source = base + (dir.v2 ? "memory.max" : "memory.limit_in_bytes");
          }
        }
      }
      if (path.empty() || path == "/") break;
      const std::size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
    if (failed) {
      out->unreadable = true;
      return false;
    }
    return found;
  } catch (...) {
    out->unreadable = true;  // no memory to read the files
    return false;
  }
}

// ---- limits of the machine and the process ----------------------------------------------------

bool machine_memory(MachineMemory* out) noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return false;
  if (detail::machine_memory_override(out)) return true;
  MachineMemory m;
  const KibField fields[] = {{"MemTotal", &m.total},
                             {"MemAvailable", &m.available},
                             {"SwapTotal", &m.swap_total},
                             {"SwapFree", &m.swap_free}};
  if (!read_proc_kib_fields("/proc/meminfo", fields, std::size(fields)) || m.total == 0) {
    return false;
  }
  char mode[8];
  if (read_small_file("/proc/sys/vm/overcommit_memory", mode, sizeof mode) && mode[0] >= '0' &&
      mode[0] <= '2') {
    m.overcommit = mode[0] - '0';
  }
  *out = m;
  return true;
}

bool address_space_limit(AddressSpaceLimit* out) noexcept {
  struct rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return false;
  out->limit = static_cast<std::size_t>(lim.rlim_cur);
  out->in_use = read_proc_kib("/proc/self/status", "VmSize");
  return true;
}

}  // namespace reservoir::pal
