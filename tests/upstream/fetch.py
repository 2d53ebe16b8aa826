"""Download the source packages whose tests tests/test_upstream_suites.py runs against
gitmem's classes, each at the version installed, into FOLDER/<distribution>-<version>/ (outside
the repository: their code is theirs, run here, never committed). A package already there is
left as it is; one pip cannot fetch is said and skipped (its tests are then skipped, saying why).

    python tests/upstream/fetch.py ~/.cache/gitmem-upstream
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

DISTRIBUTIONS = ("langgraph-checkpoint", "openai-agents", "anthropic")


def fetch(distribution: str, folder: Path) -> Path | None:
    """FOLDER/<distribution>-<version>/, the source package of the installed version."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        print(f"{distribution}: not installed, not fetched")
        return None
    target = folder / f"{distribution}-{version}"
    if target.is_dir():
        return target
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--no-binary", ":all:", "--dest", scratch, f"{distribution}=={version}"],
                              capture_output=True, text=True, timeout=600)
        archives = list(Path(scratch).glob("*.tar.gz"))
        if done.returncode != 0 or len(archives) != 1:
            print(f"{distribution} {version}: no source package ({done.stderr.strip()[-300:]})")
            return None
        with tarfile.open(archives[0]) as archive:
            top = archive.getnames()[0].split("/")[0]
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(scratch, **safe)
        (Path(scratch) / top).rename(target)
    print(f"{distribution} {version}: {target}")
    return target


def main(argv: list[str]) -> int:
    folder = Path(argv[0]).expanduser() if argv else Path.home() / ".cache" / "gitmem-upstream"
    folder.mkdir(parents=True, exist_ok=True)
    for distribution in DISTRIBUTIONS:
        fetch(distribution, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
