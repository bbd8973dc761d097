"""`pip install` through uv, from uv's cache first.

    python scripts/uv_install.py PYTHON ARG ...    # uv pip install --python PYTHON ARG ...

pyspark is published as a source distribution only, so uv builds a wheel of it (about 20 CPU
seconds and 700 MB of cache for each release). Where the package index's responses carry no
caching headers, uv takes every cached response for stale, downloads the release again and keeps
one more build of it, never removing the last: a machine that set up a fresh clone of this
repository every hour kept 45 GB of pyspark builds in a day and ran out of disk. So each install
runs offline first, from what uv has already (every requirement here names its version, so the
cache answers as the index would), and goes to the index only when that fails; after an install
from the index, `uv cache prune` removes the builds that install made stale.
"""

from __future__ import annotations

import subprocess
import sys


def install(python: str, *args: str, uv_python: str = sys.executable) -> None:
    """`uv pip install --python python args` with the uv installed for `uv_python`, from uv's cache
    when it holds everything."""
    uv = [uv_python, "-m", "uv"]
    command = [*uv, "pip", "install", "--python", python, *args]
    offline = subprocess.run([*command, "--offline"], capture_output=True, text=True)
    if offline.returncode == 0:
        sys.stdout.write(offline.stdout)
        return
    subprocess.run(command, check=True)
    subprocess.run([*uv, "cache", "prune", "-q"], check=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    try:
        install(sys.argv[1], *sys.argv[2:])
    except subprocess.CalledProcessError as error:  # uv said why
        raise SystemExit(error.returncode) from None
