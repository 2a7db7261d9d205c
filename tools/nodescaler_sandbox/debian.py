"""Debian packages the tests run (kubectl, Prometheus), pinned, in a git-ignored folder of
the checkout: fetched by apt, which checks their signatures, and extracted with
`dpkg-deb -x`, never installed, so nothing clashes with a copy on PATH and no service
starts.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository


class DebianInstallError(Exception):
    """A package could not be fetched or unpacked; the message says why."""


def _run(*command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str

    @property
    def pinned(self) -> str:
        return f"{self.name}={self.version}"

    @property
    def home(self) -> Path:
        """Where it is unpacked: its files under their absolute paths (usr/bin/...)."""
        return ROOT / ".tools" / f"{self.name}-{self.version}"

    def install(self, wanted: Path) -> Path:
        """`wanted` (a file of the package under `home`), fetched and unpacked unless it is
        there already."""
        if wanted.exists():
            return wanted
        print(f"Installing Debian's {self.pinned} into {self.home}", flush=True)
        with tempfile.TemporaryDirectory() as download:
            deb = self._download(Path(download))
            unpacking = self.home.with_name(self.home.name + ".partial")
            shutil.rmtree(unpacking, ignore_errors=True)
            unpacking.mkdir(parents=True)
            unpacked = _run("dpkg-deb", "-x", str(deb), str(unpacking))
            if unpacked.returncode != 0:
                raise DebianInstallError(
                    f"dpkg-deb -x {deb.name} failed: {unpacked.stderr.strip()}"
                )
            unpacking.rename(self.home)  # whole or not at all
        return wanted

    def _download(self, into: Path) -> Path:
        """The pinned .deb, fetched by apt; the package lists are refreshed once if apt
        does not know that version."""
        if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
            raise DebianInstallError(f"no apt-get or dpkg-deb here to fetch {self.pinned}")
        fetched = _run("apt-get", "download", self.pinned, cwd=into)
        if fetched.returncode != 0:
            print(f"apt does not know {self.pinned}: apt-get update", flush=True)
            updated = _run("apt-get", "update")
            if updated.returncode != 0:
                raise DebianInstallError(f"apt-get update failed: {updated.stderr.strip()}")
            fetched = _run("apt-get", "download", self.pinned, cwd=into)
        debs = list(into.glob("*.deb"))
        if fetched.returncode != 0 or not debs:
            raise DebianInstallError(
                f"apt-get download {self.pinned} failed: {fetched.stderr.strip()}"
            )
        return debs[0]
