#!/usr/bin/env bash
# Makes the kit a portable build links against, so that the wheel runs on glibc 2.31 and later
# (Ubuntu 20.04, Debian 11, RHEL 9 and their kin), and prints its folder:
#   scripts/portable-kit.sh [DIR]      # DIR defaults to .portable/ in the repository
#   cmake -S . -B build -DSONDE_PORTABLE_KIT="$(scripts/portable-kit.sh)"
# What it holds, all from Debian's archive through a private apt state (the machine's own apt
# configuration and package database are not touched; no root needed):
#   sysroot/   glibc 2.31's libraries and start files from Debian 11 (libc6, libc6-dev). Linking
#              against them binds every glibc symbol to a version 2.31 has; headers stay the
#              build machine's (docs/install.md says why that is sound).
#   httplib/   cpp-httplib's single header from the source of Debian 12's package (the version the
#              machine's libcpp-httplib-dev has), so the view server compiles it in, without the
#              OpenSSL, zlib and brotli that Debian's shared build brings (they need glibc 2.34).
# Idempotent: a complete kit is kept (its `complete` file lists what it was made from).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kit=${1:-$root/.portable}
if [[ -f "$kit/complete" ]]; then
  echo "$kit"
  exit 0
fi
mkdir -p "$kit"
kit=$(cd "$kit" && pwd)
state=$kit/apt
rm -rf "$state" "$kit/sysroot" "$kit/httplib"
mkdir -p "$state/debs" "$state/src"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$state/sources.list" <<EOF
deb [signed-by=$keyring] http://deb.debian.org/debian bullseye main
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
EOF
apt=("$root/scripts/private-apt.sh" "$state")
echo "portable-kit: fetching glibc 2.31 (Debian 11) and cpp-httplib's source (Debian 12)" >&2
"${apt[@]}" update >&2
(cd "$state/debs" && "${apt[@]}" download libc6 libc6-dev >&2)
(cd "$state/src" && "${apt[@]}" source --download-only cpp-httplib >&2)

mkdir -p "$kit/sysroot"
for deb in "$state"/debs/*.deb; do dpkg-deb -x "$deb" "$kit/sysroot"; done
# The packages' links are absolute (/lib/x86_64-linux-gnu/...): inside the sysroot they must
# point inside it, or the linker follows them to the build machine's own glibc.
while IFS= read -r link; do
  target=$(readlink "$link")
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$kit/sysroot$target")" "$link"
done < <(find "$kit/sysroot" -type l -lname '/*')
[[ -f "$kit/sysroot/usr/lib/x86_64-linux-gnu/libc_nonshared.a" ]] ||
  { echo "portable-kit: libc6-dev has no libc_nonshared.a" >&2; exit 1; }

# The upstream source with Debian's patches (security fixes) applied, as Debian's build has them.
tarball=$(ls "$state"/src/cpp-httplib_*.orig.tar.*)
mkdir -p "$state/src/tree" "$kit/httplib"
tar -xf "$tarball" -C "$state/src/tree" --strip-components=1
tar -xf "$(ls "$state"/src/cpp-httplib_*.debian.tar.*)" -C "$state/src/tree"
if [[ -f "$state/src/tree/debian/patches/series" ]]; then
  while read -r patch _; do
    [[ -z "$patch" || "$patch" == \#* ]] && continue
    patch -s -d "$state/src/tree" -p1 <"$state/src/tree/debian/patches/$patch"
  done <"$state/src/tree/debian/patches/series"
fi
cp "$state/src/tree/httplib.h" "$state/src/tree/LICENSE" "$kit/httplib/"

{
  echo "sysroot: $(cd "$state/debs" && ls ./*.deb | tr '\n' ' ')"
  echo "httplib: $(basename "$tarball")"
} >"$kit/complete"
rm -rf "$state/lists" "$state/cache" "$state/src/tree"
echo "$kit"
