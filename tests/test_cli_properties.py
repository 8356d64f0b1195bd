"""The CLI over arbitrary values: a clear one-line error (exit 2) or a valid run, never a traceback."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fathom.backends import sim
from fathom.cli import main as cli
from fathom.run import runner
from fathom.spec import RunSpec

TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
NUMBERISH = st.text(alphabet="0123456789.,-+ekKmMnaif ", max_size=14)
SIM_SETTING = st.sampled_from(
    ["window", "accuracy", "floor", "dip", "half", "slope", "delay", "seed", "nll", "drop", "at"]
)


class Accepted(Exception):
    """The CLI parsed its arguments into a spec that the run would start with."""


@pytest.fixture
def parse_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(
        spec: RunSpec, run_dir: Path, show_progress: bool = True, order: str = "prefix", **_: object
    ) -> None:
        runner.prepare(spec, order)  # every check the run makes before it touches its folder
        raise Accepted

    monkeypatch.setattr("fathom.cli.run_spec", run)


def outcome(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What the CLI did with ``args``: accepted them (parse_only), ran, or refused them clearly."""
    try:
        status = cli(args)
    except Accepted:
        return "accepted"
    except SystemExit as exc:  # argparse's own refusals: usage and one error line, status 2
        assert exc.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith("fathom")
        return "refused"
    err = capsys.readouterr().err.strip()
    if status == 0:
        return "ran"
    assert status == 2, err
    assert err.startswith("fathom: error: ") and "\n" not in err, err
    return "refused"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=NUMBERISH, depths=NUMBERISH, samples=NUMBERISH, seed=NUMBERISH)
@example(lengths="1000000M", depths="3", samples="1", seed="0")
@example(lengths="99999999999999999999999", depths="3", samples="1", seed="0")
@example(lengths="1k", depths="100000000", samples="1", seed="0")
@example(lengths="1k", depths="3", samples="1000000000", seed="0")
@example(lengths="1k", depths="nan", samples="1", seed="-5")
def test_sizes_and_numbers(
    parse_only: None, capsys: pytest.CaptureFixture[str], lengths: str, depths: str, samples: str, seed: str
) -> None:
    args = ["run", "niah", "--model", "sim:perfect", "--tokenizer", "char", "--run-dir", "unused"]
    args += ["--lengths", lengths, "--depths", depths, "--samples", samples, "--seed", seed]
    outcome(args, capsys)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(archetype=st.sampled_from(["cliff", "lost-in-the-middle", "pi-decay", "yarn", "perfect", "noisy"]),
       key=SIM_SETTING | TEXT, value=NUMBERISH | TEXT)  # fmt: skip
@example(archetype="lost-in-the-middle", key="window", value="1k")
@example(archetype="lost-in-the-middle", key="window", value="0")
@example(archetype="pi-decay", key="half", value="0")
@example(archetype="cliff", key="delay", value="-1")
@example(archetype="pi-decay", key="slope", value="1e308")
@example(archetype="cliff", key="accuracy", value="nan")
def test_simulated_settings_run_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, archetype: str, key: str, value: str,
) -> None:  # fmt: skip
    """Really run, at 1k and 64k: a setting that passes must not break the model later. A delay the
    model accepts (up to an hour a request) is taken and not slept: the run would wait it out."""
    monkeypatch.setattr(sim, "time", SimpleNamespace(sleep=lambda _: None, perf_counter=time.perf_counter))
    model = f"sim:{archetype}?{key}={value}"
    folder = tmp_path_factory.mktemp("run") / "run"
    args = ["run", "niah", "--model", model, "--lengths", "1k,64k", "--depths", "0.5", "--samples", "1"]
    if outcome([*args, "--no-control", "--no-progress", "--run-dir", str(folder)], capsys) == "ran":
        assert len((folder / "samples.jsonl").read_text().splitlines()) == 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--run-dir", "--out", "--order", "--scoring", "--needle", "--template"]),
       value=TEXT)  # fmt: skip
@example(option="--run-dir", value="")
@example(option="--order", value="sideways")
def test_names_and_folders(
    parse_only: None, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    outcome(["run", "niah", "--model", "sim:perfect", "--lengths", "1k", option, value], capsys)
