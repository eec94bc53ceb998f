// What ties a profile's line costs to the source file they were measured in. The Python hook
// records the fingerprint of each file whose lines it times (run_info `source.fnv1a64:PATH`);
// readers show a line's text only from a file with that fingerprint. A profile names files by
// path, and a profile received from someone else could name any file of the reader's (a
// credentials file, with line_costs rows for its lines): `sonde report --by line`, the
// candidates' evidence and the viewer's page would have printed it. The same check keeps an
// edited source from showing new text beside old lines' times.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace sonde {

inline constexpr const char* kSourceFingerprintKey = "source.fnv1a64:";

// FNV-1a over the file's bytes, and its size, as hex; "" when it cannot be read. Not a
// cryptographic hash: it only has to be unknowable without the file's contents.
inline std::string source_fingerprint(const std::string& path) {
  std::FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  std::uint64_t h = 14695981039346656037ull, size = 0;
  unsigned char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
    for (size_t i = 0; i < n; ++i) h = (h ^ buf[i]) * 1099511628211ull;
    size += n;
  }
  bool ok = std::ferror(f) == 0;
  std::fclose(f);
  if (!ok) return {};
  char out[40];
  std::snprintf(out, sizeof out, "%016llx-%llx", static_cast<unsigned long long>(h),
                static_cast<unsigned long long>(size));
  return out;
}

}  // namespace sonde
