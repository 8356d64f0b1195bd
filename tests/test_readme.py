"""The README's Getting started path, run as a new user would: every command of its blocks is either
run here (the simulated ones, in a fresh folder, through the installed `fathom` command) or one of
the few that need a download, a compile or a browser, named below."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# Commands that install, compile or run a real model for minutes: read, not run.
NOT_RUN = (
    "python3 -m venv ",
    "pip install ",
    "fathom run niah --model 'llamacpp:",
    "bash .ci/run",
)


def getting_started() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Getting started") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_every_command_is_run_here_or_named_as_not_run() -> None:
    commands = getting_started()
    assert len(commands) >= 8
    for command in commands:
        words = command.split()
        runnable = words[0] == "fathom" and ("sim:" in command or words[1] != "run")
        assert runnable or command.startswith(NOT_RUN), command


@pytest.mark.slow
def test_the_simulated_path_runs_as_written(tmp_path: Path) -> None:
    fathom = shutil.which("fathom", path=str(Path(sys.executable).parent)) or shutil.which("fathom")
    assert fathom is not None, "the fathom command is not installed"
    env = dict(os.environ, FATHOM_CACHE_DIR=os.environ.get("FATHOM_CACHE_DIR", str(tmp_path / "cache")))
    for desktop in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):  # `report --open` prints, opens nothing
        env.pop(desktop, None)
    ran = []
    for command in getting_started():
        if command.startswith(NOT_RUN):
            continue
        args = shlex.split(command, comments=True)  # a trailing "# exits 1 (...)" is a note
        done = subprocess.run([fathom, *args[1:]], cwd=tmp_path, capture_output=True, text=True, env=env)
        # fathom compare exits 1 when a cell regressed, which the README's pair is made to show.
        expected = 1 if args[1] == "compare" else 0
        assert done.returncode == expected, f"{command}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        ran.append(args[1])
    assert ran == ["run", "report", "run", "compare", "runs"]
    assert (tmp_path / "runs" / "cliff" / "report.html").is_file()
