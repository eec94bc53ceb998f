"""A wheel (PEP 427) from a directory: its files, a .dist-info with a RECORD of their hashes.
Written here because the build backend runs in the interpreter it builds for, and pyenv's
interpreters have no `wheel` package."""
import base64
import hashlib
import os
import stat
import zipfile

# Fixed times make two builds of the same tree byte-identical.
_EPOCH = (2020, 1, 1, 0, 0, 0)


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(path, root, dist_info):
    """Zips root (which holds dist_info/ with METADATA, WHEEL, entry_points.txt) into path,
    RECORD last; executables keep their mode, so the kit's programs run after pip installs."""
    names = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            names.append(os.path.relpath(os.path.join(dirpath, name), root))
    # dist-info last, as the format recommends.
    names.sort(key=lambda n: (n.startswith(dist_info + "/"), n))
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in names:
            full = os.path.join(root, rel)
            with open(full, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(rel, _EPOCH)
            mode = 0o755 if os.stat(full).st_mode & stat.S_IXUSR else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            record.append(f"{rel},{_digest(data)},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", _EPOCH)
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, "\n".join(record) + "\n")
