"""Times the sample loop of RULER's generator scripts; put on PYTHONPATH by bench_ruler.py only.

Each generator (``data/synthetic/niah.py``, ``qa.py``, ...) first finds how much haystack fits the
length by probing, then builds its samples in ``for index in tqdm(range(num_samples))``. In those
processes alone this wraps tqdm to append the loop's seconds and sample count to the file named by
$FATHOM_BENCH_RULER_LOOP, so that a run with fewer samples can be scaled up honestly: the startup
and the probing are paid once per run, only the loop grows with the samples. The generators import
tqdm anyway, so this adds no import to the processes it times; prepare.py, which starts them, and
every other process of the virtualenv are left alone.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOOP_FILE = "FATHOM_BENCH_RULER_LOOP"


def _install(record: Path) -> None:
    import tqdm

    class LoopTimer(tqdm.tqdm):  # type: ignore[misc]
        def __iter__(self) -> Iterator[Any]:
            start, count = time.perf_counter(), 0
            for item in super().__iter__():
                yield item  # the generator's loop body runs here, inside the timed span
                count += 1
            entry = {"loop_s": time.perf_counter() - start, "samples": count}
            with record.open("a") as file:
                file.write(json.dumps(entry) + "\n")

    tqdm.tqdm = LoopTimer  # ``from tqdm import tqdm`` in the generator now finds the timer


def _is_generator() -> bool:
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return script is not None and script.parent.name == "synthetic" and script.suffix == ".py"


if os.environ.get(LOOP_FILE) and _is_generator():
    _install(Path(os.environ[LOOP_FILE]))
