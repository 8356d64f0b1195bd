"""Record lines of every kind (valid, damaged, with impossible values, of a newer schema, torn), read by
every reader of a run folder: each accepts, quarantines or refuses with one line (a FathomError,
never another exception), a repair loses no line, and nothing outside the folder changes (#30)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fathom.errors import FathomError
from fathom.run.judgements import JUDGEMENTS, JUDGEMENTS_QUARANTINE, read_judgements
from fathom.run.store import QUARANTINE, SAMPLES, RunFolder

FIXTURE = Path(__file__).parent / "fixtures" / "records-v11"
RECORDS = [json.loads(line) for line in (FIXTURE / "samples.jsonl").read_text().splitlines()]
JUDGEMENT = {
    "sample_id": "niah|L2048|D0.2500|S0", "prompt_sha256": "0" * 64, "answer_sha256": "1" * 64,
    "role": "judge", "judge": "sim-judge:reference", "judge_identity": "2" * 16, "rubric": "qa@1",
    "rubric_sha256": "3" * 64, "score": 1, "reason": "", "reply": "", "attempts": 1, "latency_s": 0.1,
    "error": None, "record": "judgement", "schema": 1,
}  # fmt: skip

NUMBERS = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([10**400, -1, 0, 1, 0.5, 2.0])
)
VALUES = NUMBERS | st.none() | st.booleans() | st.text(max_size=8) | st.lists(NUMBERS, max_size=3)


def changed(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``base`` with one of its fields set to any value, removed, or a field added."""
    key = st.sampled_from(sorted(base))
    return st.one_of(
        st.builds(lambda k, v: base | {k: v}, key, VALUES),
        st.builds(lambda k: {n: v for n, v in base.items() if n != k}, key),
        st.builds(lambda k, v: base | {k: v}, st.text(max_size=6), VALUES),
        st.builds(lambda v: base | {"schema": v}, st.integers(min_value=-3, max_value=30)),
    )


def line(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode() + b"\n"  # NaN, Infinity as Python writes them


NOISE = st.binary(max_size=40).map(lambda raw: raw.replace(b"\n", b""))
DAMAGED = NOISE.map(lambda raw: raw + b"\n")
SAMPLE_LINES = st.lists(
    st.sampled_from(RECORDS).map(line) | st.sampled_from(RECORDS).flatmap(changed).map(line) | DAMAGED,
    max_size=8,
)
JUDGEMENT_LINES = st.lists(st.just(line(JUDGEMENT)) | changed(JUDGEMENT).map(line) | DAMAGED, max_size=4)


def outcome(read: Any) -> str:
    """What a reader did: read, or refused in one line of its own; any other exception fails."""
    try:
        read()
    except FathomError as exc:
        assert "\n" not in str(exc), str(exc)
        return "refused"
    return "read"


def lines_of(data: bytes) -> list[bytes]:
    """The lines of a file that ends in a newline, each with its own (only b"\\n" ends a line)."""
    return [part + b"\n" for part in data.split(b"\n")[:-1]]


def snapshot(place: Path) -> dict[str, bytes]:
    return {str(p.relative_to(place)): p.read_bytes() for p in sorted(place.rglob("*")) if p.is_file()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=SAMPLE_LINES, judgements=JUDGEMENT_LINES, torn=NOISE)
def test_every_reader_accepts_quarantines_or_refuses_in_one_line(
    samples: list[bytes], judgements: list[bytes], torn: bytes
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        place = Path(scratch)
        (place / "beside.txt").write_bytes(b"not the folder's\n")
        folder = place / "run"
        shutil.copytree(FIXTURE, folder)
        written = b"".join(samples) + torn
        (folder / SAMPLES).write_bytes(written)
        (folder / JUDGEMENTS).write_bytes(b"".join(judgements))
        outside = {k: v for k, v in snapshot(place).items() if not k.startswith("run")}

        event(f"records {outcome(lambda: RunFolder(folder).records())}")
        event(f"judgements {outcome(lambda: read_judgements(folder))}")
        repaired = outcome(lambda: RunFolder(folder).repair())
        event(f"repair {repaired}")
        if repaired == "read":
            # Nothing lost: every line is still in samples.jsonl or moved aside, and what stays reads.
            kept = (folder / SAMPLES).read_bytes()
            aside = (folder / QUARANTINE).read_bytes() if (folder / QUARANTINE).exists() else b""
            torn_line = [torn + b"\n"] if torn else []
            assert sorted(lines_of(kept) + lines_of(aside)) == sorted(samples + torn_line)
            assert outcome(lambda: RunFolder(folder).records()) == "read"
        else:
            assert (folder / SAMPLES).read_bytes() == written  # refused: nothing moved
        assert not (folder / JUDGEMENTS_QUARANTINE).exists()  # readers of judgements move nothing
        assert {k: v for k, v in snapshot(place).items() if not k.startswith("run")} == outside
