"""Debian's kubectl, pinned, in a git-ignored folder of the checkout: an independent client
the tests run against the loopback API server (`python -m nodescaler_sandbox.kube.kubectl`
installs it; `make test` does, as only the tests need it).

Debian's package, not a download from the Kubernetes project, so apt checks its signature;
extracted with `dpkg-deb -x`, never installed, so it does not clash with a kubectl on PATH
(`nodescaler_sandbox.debian`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nodescaler_sandbox.debian import DebianInstallError, DebianPackage

PACKAGE = "kubernetes-client"
VERSION = "1.20.5+really1.20.2-1.1+deb12u1"  # bookworm's
DEBIAN = DebianPackage(PACKAGE, VERSION)
HOME = DEBIAN.home
KUBECTL = HOME / "usr" / "bin" / "kubectl"
HOW_TO_INSTALL = (
    f"Debian's kubectl ({PACKAGE}={VERSION}) is not at {KUBECTL}: run `make test` "
    "(apt-get download and dpkg-deb, on Debian or Ubuntu; apt-get update needs root)"
)


def install() -> Path:
    """kubectl at `KUBECTL`, fetched and unpacked unless it is there already."""
    return DEBIAN.install(KUBECTL)


def main() -> None:
    try:
        install()
    except (DebianInstallError, OSError, subprocess.SubprocessError) as error:
        sys.exit(f"{error}\n{HOW_TO_INSTALL}")


if __name__ == "__main__":
    main()
