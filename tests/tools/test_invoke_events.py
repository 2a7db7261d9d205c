"""`nodescaler invoke` on every sample in events/ with every function it runs: the function
that takes the sample runs it in the sandbox; any other says, in one line, which function
takes it and what it takes instead, and exits 2. Which function takes which sample is read
from events/README.md's table, not from the code under test."""

from __future__ import annotations

import re
from pathlib import Path

# Powertools' log handler keeps the stdout it was made with: made here, at collection, it
# writes to pytest's session-wide capture, not to one test's capsys (closed after it).
import nodescaler.observability.reports  # noqa: F401
import pytest
from nodescaler_cli.main import main
from nodescaler_sandbox import runner as scenarios

EVENTS = Path(__file__).parents[2] / "events"
OWNER = dict(
    re.findall(r"^\| `([\w-]+\.json)` \| (\w+) \|", (EVENTS / "README.md").read_text(), re.M)
)
SAMPLES = sorted(EVENTS.glob("*.json"))


def test_the_readme_names_the_function_of_every_sample() -> None:
    assert sorted(OWNER) == [path.name for path in SAMPLES]


@pytest.mark.parametrize("function", ["dispatch", "evaluate", "drain", "terminate"])
@pytest.mark.parametrize("event", SAMPLES, ids=[path.stem for path in SAMPLES])
def test_every_sample_runs_or_names_the_function_that_takes_it(
    function: str,
    event: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(scenarios, "OUT", tmp_path)
    relative = event.relative_to(EVENTS.parent)
    monkeypatch.chdir(EVENTS.parent)
    code = main(["invoke", function, str(relative)])
    printed = capsys.readouterr()
    owner = OWNER[event.name]
    if owner == function:
        assert code == 0, printed.err
        assert printed.out.rstrip().endswith(f"→ logs: {tmp_path / 'invoke'}/logs-{function}.jsonl")
        return
    assert code == 2
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err
    assert printed.err.startswith(f"nodescaler invoke: {relative}: an event for {owner}")
    assert f"not {function}; {function} takes " in printed.err
    examples = [f"events/{name}" for name, its in sorted(OWNER.items()) if its == function]
    assert printed.err.rstrip().endswith(f"e.g. {', '.join(examples)}")


def test_an_event_no_function_takes_says_what_the_function_expects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "odd.json"
    event.write_text('{"detail-type": "Something Else", "source": "aws.s3"}')
    assert main(["invoke", "evaluate", str(event)]) == 2
    assert capsys.readouterr().err == (
        f"nodescaler invoke: {event}: no function takes this event; evaluate takes an SQS "
        "batch of evaluation requests, e.g. events/evaluate-batch.json\n"
    )
