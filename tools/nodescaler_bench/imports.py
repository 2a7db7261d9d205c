"""Cold imports: each function's handler module against `boto3` alone, in fresh interpreters.

Each import runs in a new interpreter (`-I -S`: no site-packages, nothing of this
machine's environment) whose `sys.path` is what Lambda gives the function: its folder,
then `/opt/python` with its layers extracted in order. The layers are the ones synth
built (`bench.layers`), with one change: a distribution with compiled code (pydantic-core,
PyYAML, msgspec...) is swapped for this machine's build of the same version from the
virtualenv, since the built ones are for arm64 and Python 3.14. The interpreter's own
start is not timed, only the import.

boto3 and the handlers are imported in turn within each round, so a busy moment on the
machine weighs on both; the ratio is taken within a round and its median reported. A
first round, not counted, writes the bytecode caches every later round reads. (The
layers' own caches are left out: pip wrote them for the Python that ran synth, and Lambda,
on another Python with /opt read-only, ignores them.)
"""

from __future__ import annotations

import csv
import importlib.metadata
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from nodescaler_sandbox.sandbox import ROOT

from nodescaler_bench.layers import Function, Synthesized

OUT = Path("out/bench/imports")
FUNCTIONS = ROOT / "functions"
ROUNDS = 7
COMPILED = (".so", ".pyd")
PROBE = """\
import sys, time
sys.path[:0] = {paths!r}
started = time.perf_counter()
import {module}
print(time.perf_counter() - started)
"""


def _swap_compiled(python: Path, dist_info: Path) -> None:
    """Replace a distribution built for Lambda by this machine's build of the same version."""
    with (dist_info / "RECORD").open() as record:
        files = [row[0] for row in csv.reader(record) if row and not row[0].startswith("..")]
    if not any(f.endswith(COMPILED) for f in files):
        return
    name, version = dist_info.name.removesuffix(".dist-info").split("-", 1)
    local = importlib.metadata.distribution(name)
    if local.version != version:
        raise RuntimeError(
            f"{dist_info.name}: the layer has {name} {version}, this virtualenv {local.version}; "
            "`make setup` (or `make lock`) brings them together"
        )
    for name_in_layer in files:
        (python / name_in_layer).unlink(missing_ok=True)
    for local_file in local.files or ():
        if local_file.parts[0] == ".." or "__pycache__" in local_file.parts:
            continue
        target = python / local_file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(str(local.locate_file(local_file))), target)


def lambda_opt(synthesized: Synthesized, layers: tuple[str, ...], into: Path) -> Path:
    """`/opt/python` as Lambda extracts these layers (later ones over earlier), for here."""
    python = into / "python"
    shutil.rmtree(into, ignore_errors=True)
    python.mkdir(parents=True)
    for name in layers:
        source = synthesized.layers[name] / "python"
        if source.is_dir():
            shutil.copytree(
                source, python, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )
    for dist_info in sorted(python.glob("*.dist-info")):
        _swap_compiled(python, dist_info)
    return python


def import_seconds(paths: list[str], module: str) -> float:
    """How long `import module` takes in a fresh interpreter with `paths` first on sys.path."""
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROBE.format(paths=paths, module=module)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"import {module} from {paths} failed:\n{result.stderr}")
    return float(result.stdout.strip().splitlines()[-1])


def function_names(folder: Path = FUNCTIONS) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if (p / "handler.py").is_file())


def run(
    synthesized: Synthesized,
    rounds: int = ROUNDS,
    out: Path = OUT,
    functions_folder: Path = FUNCTIONS,
) -> dict[str, float]:
    functions = function_names(functions_folder)
    baseline = next(n for n, f in synthesized.layers.items() if (f / "python" / "boto3").is_dir())
    shutil.rmtree(out, ignore_errors=True)
    opts: dict[tuple[str, ...], Path] = {}  # one /opt per set of layers, shared

    def opt_of(layers: tuple[str, ...]) -> str:
        if layers not in opts:
            opts[layers] = lambda_opt(synthesized, layers, out / "+".join(layers))
        return str(opts[layers].resolve())

    targets = {"boto3": [opt_of((baseline,))]}
    for name in functions:
        # A function the stack does not deploy yet gets every layer, from its source folder.
        function = synthesized.functions.get(
            name, Function(functions_folder / name, tuple(synthesized.layers))
        )
        code = out / f"function-{name}"  # a copy: the first round writes bytecode into it
        shutil.copytree(function.code, code, ignore=shutil.ignore_patterns("__pycache__"))
        targets[name] = [str(code.resolve()), opt_of(function.layers)]
    seconds: dict[str, list[float]] = {name: [] for name in targets}
    for round_ in range(rounds + 1):
        for name, paths in targets.items():
            elapsed = import_seconds(paths, "boto3" if name == "boto3" else "handler")
            if round_:  # the first round writes the bytecode caches
                seconds[name].append(elapsed)
    results: dict[str, float] = {"cold_import_ms_boto3": _ms(seconds["boto3"])}
    for name in functions:
        ratios = [f / b for f, b in zip(seconds[name], seconds["boto3"], strict=True)]
        results[f"cold_import_ratio_{name}"] = round(statistics.median(ratios), 2)
        results[f"cold_import_ms_{name}"] = _ms(seconds[name])
    return results


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)
