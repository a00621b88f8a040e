"""Rebuild a held-out corpus from PyPI, so that `bench/precision.py` can measure it again.

    .venv/bin/python bench/precision_fetch.py bench/precision/heldout16.json DIR
    .venv/bin/python bench/precision.py --corpus DIR

The set file names each checked file by the source distribution it comes from, its path inside
it and its SHA-256, and carries the hand labels of its findings. The code itself is third-party
and is not in this repository: this script downloads each sdist with pip (`--no-binary :all:
--no-deps`, so nothing is built or installed), copies the named files into `DIR/files/` and
refuses any file whose content differs from the one that was labelled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

ARCHIVE = re.compile(r"\.(tar\.gz|tar\.bz2|zip)$")


def requirement(sdist: str) -> str:
    """`k-diffusion-0.1.1.post1.tar.gz` -> `k-diffusion==0.1.1.post1`."""
    name, _, version = ARCHIVE.sub("", sdist).rpartition("-")
    return f"{name}=={version}"


def read_member(archive: Path, inner: str) -> bytes | None:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if name.split("/", 1)[-1] == inner:
                    return z.read(name)
        return None
    with tarfile.open(archive) as t:
        for member in t.getmembers():
            if member.isfile() and member.name.split("/", 1)[-1] == inner:
                handle = t.extractfile(member)
                return handle.read() if handle else None
    return None


def from_index(sdist: str, dest: str) -> bool:
    """Fetch `sdist` straight from PyPI's simple index: pip downloads an sdist only after
    building its metadata, which fails for packages whose build needs tools not installed here."""
    name = requirement(sdist).partition("==")[0]
    try:
        with urllib.request.urlopen(f"https://pypi.org/simple/{name}/", timeout=60) as r:
            page = r.read().decode()
        for url, digest in re.findall(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', page):
            if url.rsplit("/", 1)[-1] == sdist:
                with urllib.request.urlopen(url, timeout=300) as r:
                    data = r.read()
                if hashlib.sha256(data).hexdigest() != digest:
                    return False
                (Path(dest) / sdist).write_bytes(data)
                return True
    except (OSError, ValueError):
        return False
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("set", help="a set file such as bench/precision/heldout16.json")
    ap.add_argument("corpus", help="the folder to build (files/ and labels.json)")
    args = ap.parse_args()
    spec = json.load(open(args.set))
    corpus = Path(args.corpus)
    (corpus / "files").mkdir(parents=True, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for sdist in sorted({f["sdist"] for f in spec["files"]}):
            got = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
                + ["--dest", scratch, requirement(sdist)],
                capture_output=True,
                text=True,
            )
            if (got.returncode != 0 or not (Path(scratch) / sdist).exists()) and not from_index(
                sdist, scratch
            ):
                print(f"could not download {sdist}: {got.stderr.strip().splitlines()[-1:]}")
                failed += 1
        for item in spec["files"]:
            archive = Path(scratch) / item["sdist"]
            data = read_member(archive, item["path"]) if archive.exists() else None
            if data is None or hashlib.sha256(data).hexdigest() != item["sha256"]:
                print(f"missing or changed: {item['sdist']}/{item['path']}")
                failed += 1
                continue
            (corpus / "files" / item["file"]).write_bytes(data)
    json.dump(spec["labels"], open(corpus / "labels.json", "w"), indent=1)
    print(
        f"{len(spec['files']) - failed} of {len(spec['files'])} files, {len(spec['labels'])} labels in {corpus}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
