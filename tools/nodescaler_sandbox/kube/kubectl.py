"""Debian's kubectl, pinned, in a git-ignored folder of the checkout: an independent client
the tests run against the loopback API server (`python -m nodescaler_sandbox.kube.kubectl`
installs it; `make setup` does).

Debian's package, not a download from the Kubernetes project, so apt checks its signature;
extracted with `dpkg-deb -x`, never installed, so it does not clash with a kubectl on PATH.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "kubernetes-client"
VERSION = "1.20.5+really1.20.2-1.1+deb12u1"  # bookworm's
ROOT = Path(__file__).resolve().parents[3]
HOME = ROOT / ".tools" / f"{PACKAGE}-{VERSION}"
KUBECTL = HOME / "usr" / "bin" / "kubectl"
HOW_TO_INSTALL = (
    f"Debian's kubectl ({PACKAGE}={VERSION}) is not at {KUBECTL}: run `make setup` "
    "(apt-get download and dpkg-deb, on Debian or Ubuntu; apt-get update needs root)"
)


class KubectlInstallError(Exception):
    """Debian's package could not be fetched or unpacked; the message says why."""


def _run(*command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def _download(into: Path) -> Path:
    """The pinned .deb, fetched by apt; the package lists are refreshed once if apt does
    not know that version."""
    pinned = f"{PACKAGE}={VERSION}"
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise KubectlInstallError(f"no apt-get or dpkg-deb here to fetch {pinned}")
    fetched = _run("apt-get", "download", pinned, cwd=into)
    if fetched.returncode != 0:
        print(f"apt does not know {pinned}: apt-get update", flush=True)
        updated = _run("apt-get", "update")
        if updated.returncode != 0:
            raise KubectlInstallError(f"apt-get update failed: {updated.stderr.strip()}")
        fetched = _run("apt-get", "download", pinned, cwd=into)
    debs = list(into.glob("*.deb"))
    if fetched.returncode != 0 or not debs:
        raise KubectlInstallError(f"apt-get download {pinned} failed: {fetched.stderr.strip()}")
    return debs[0]


def install() -> Path:
    """kubectl at `KUBECTL`, fetched and unpacked unless it is there already."""
    if KUBECTL.exists():
        return KUBECTL
    print(f"Installing Debian's kubectl ({PACKAGE}={VERSION}) into {HOME}", flush=True)
    with tempfile.TemporaryDirectory() as download:
        deb = _download(Path(download))
        unpacking = HOME.with_name(HOME.name + ".partial")
        shutil.rmtree(unpacking, ignore_errors=True)
        unpacking.mkdir(parents=True)
        unpacked = _run("dpkg-deb", "-x", str(deb), str(unpacking))
        if unpacked.returncode != 0:
            raise KubectlInstallError(f"dpkg-deb -x {deb.name} failed: {unpacked.stderr.strip()}")
        unpacking.rename(HOME)  # whole or not at all
    return KUBECTL


def main() -> None:
    try:
        install()
    except (KubectlInstallError, OSError, subprocess.SubprocessError) as error:
        sys.exit(f"{error}\n{HOW_TO_INSTALL}")


if __name__ == "__main__":
    main()
