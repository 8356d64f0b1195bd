"""fathom.errors' own words, read whole: what the eighth round of mutation testing found no test of
in the selection ``[tool.mutmut]`` runs (``first_line`` is read in ``test_mutants_store.py``)."""

from __future__ import annotations

from fathom.errors import MissingExtraError
from fathom.packages import install_command


def test_a_missing_extra_names_the_module_and_the_command_that_installs_it() -> None:
    said = str(MissingExtraError("torch/transformers", "hf"))
    assert said == f"torch/transformers is not installed; install it with: {install_command('hf')}"
    assert said.endswith("[hf]'")  # the extra, not another's
