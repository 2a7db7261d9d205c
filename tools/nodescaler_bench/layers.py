"""The Lambda layers as `cdk synth` builds them, and each one's size unzipped.

`app.py` runs as the CDK CLI runs it (`CDK_OUTDIR` set), so the layers come out of the
stack's own local bundling (`infra/layers.py`: pip for Lambda's platform, botocore
pruned) into asset folders, and the template says which function carries which layer.
Nothing is rebuilt by hand here; like every synth, pip fetches the pinned wheels from PyPI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodescaler_sandbox.sandbox import ROOT

OUT = Path("out/bench/cdk.out")
MB = 2**20  # as Lambda counts its quotas


@dataclass(frozen=True)
class Function:
    code: Path  # the staged function folder (handler.py)
    layers: tuple[str, ...]  # in the order Lambda extracts them into /opt


@dataclass(frozen=True)
class Synthesized:
    layers: dict[str, Path]  # layer name → its staged asset folder
    functions: dict[str, Function]  # folder under functions/ → what Lambda runs


def synthesize(out: Path = OUT) -> Synthesized:
    """Synthesize the stack into `out` (emptied first) with the layers built."""
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    environment = os.environ | {
        "CDK_OUTDIR": str(out.resolve()),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"synth failed:\n{result.stdout}\n{result.stderr}")
    return read(out)


def read(out: Path) -> Synthesized:
    """Which staged folder is which layer, and which layers each function carries."""
    template_path = next(out.glob("*.template.json"))
    template: dict[str, Any] = json.loads(template_path.read_text())
    assets: dict[str, Any] = json.loads(
        template_path.with_suffix("").with_suffix(".assets.json").read_text()
    )

    def folder(content: dict[str, Any]) -> Path:
        digest = str(content["S3Key"]).removesuffix(".zip")
        return out / str(assets["files"][digest]["source"]["path"])

    def construct_id(content: dict[str, Any]) -> str:
        digest = str(content["S3Key"]).removesuffix(".zip")
        # "Nodescaler/Layers/Dependencies/Code", "Nodescaler/Dispatch/Function/Code"
        path = str(assets["files"][digest]["displayName"]).split("/")
        return path[-2] if path[-2] != "Function" else path[-3]

    resources: dict[str, Any] = template["Resources"]
    names = {
        key: construct_id(r["Properties"]["Content"]).lower()
        for key, r in resources.items()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    }
    layers = {
        names[key]: folder(r["Properties"]["Content"])
        for key, r in resources.items()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    }
    folders = {_squash(path.name): path.name for path in (ROOT / "functions").iterdir()}
    functions: dict[str, Function] = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::Function" or "S3Key" not in resource["Properties"].get(
            "Code", {}
        ):
            continue
        name = folders.get(_squash(construct_id(resource["Properties"]["Code"])))
        if name is not None:  # not one of CDK's own helper functions
            layers_of = tuple(names[ref["Ref"]] for ref in resource["Properties"].get("Layers", []))
            functions[name] = Function(folder(resource["Properties"]["Code"]), layers_of)
    return Synthesized(layers, functions)


def _squash(name: str) -> str:
    """`CapacityEvents` (construct id) and `capacity_events` (folder) compare equal."""
    return "".join(c for c in name.lower() if c.isalnum())


def unzipped_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def sizes(synthesized: Synthesized) -> dict[str, float]:
    return {
        f"layer_unzipped_mb_{name}": round(unzipped_bytes(folder) / MB, 2)
        for name, folder in sorted(synthesized.layers.items())
    }
