"""RULER's tasks as data: each variant is a family generator and its parameters.

Templates, answer prefixes, tokens to generate and metrics follow NVIDIA/RULER
(``scripts/data/synthetic/constants.py``, ``scripts/synthetic.yaml`` and
``scripts/eval/synthetic/constants.py``). The answer prefix is sent as the opening of the
assistant's turn; the tokens to generate count in the length, as RULER counts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Bump when a template, a generator or a parameter below changes the prompts.
RULER_VERSION = 2

# Effective length thresholds: RULER's absolute one (Llama-2-7B-chat at 4k, in percent) and the
# relative one (a share of the model's own score at the shortest RULER length).
RULER_THRESHOLD = 85.6
RELATIVE_THRESHOLD = 0.85
RULER_LENGTHS = (4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True)
class FamilyText:
    """A family's template around ``{context}`` (which splits it into before and after) and the
    answer prefix. ``{query}`` marks the question; other fields are filled per variant."""

    template: str
    answer_prefix: str
    tokens_to_generate: int
    metric: str  # "all" (string_match_all) or "any" (string_match_part)


FAMILIES = {
    "niah": FamilyText(
        "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize "
        "it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special "
        "magic {type_needle_v} for {query} mentioned in the provided text?",
        " The special magic {type_needle_v} for {query} mentioned in the provided text are",
        128,
        "all",
    ),
    "vt": FamilyText(
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
        "Question: Find all variables that are assigned the value {query} in the text above.",
        # "assgined" is RULER's own spelling; kept so prompts match theirs word for word.
        " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables "
        "are assgined the value {query}, they are: ",
        30,
        "all",
    ),
    "cwe": FamilyText(
        "Below is a numbered list of words. In these words, some appear more often than others. "
        "Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common "
        "words in the above list?",
        " Answer: The top 10 words that appear most often in the list are:",
        120,
        "all",
    ),
    "fwe": FamilyText(
        "Read the following coded text and track the frequency of each coded word. Find the three most "
        "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please "
        "ignore the dots '....'. What are the three most frequently appeared words in the above coded "
        "text?",
        " Answer: According to the coded text above, the three most frequently appeared words are:",
        50,
        "all",
    ),
    "qa": FamilyText(
        "Answer the question based on the given documents. Only give me the answer and do not output any "
        "other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on "
        "the given documents. Only give me the answer and do not output any other words.\n\n"
        "Question: {query}",
        " Answer:",
        32,
        "any",
    ),
}


@dataclass(frozen=True)
class Variant:
    """One RULER task: a family and its parameters."""

    name: str
    family: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> FamilyText:
        return FAMILIES[self.family]


def _niah(
    name: str, haystack: str, key: str, value: str, keys: int = 1, values: int = 1, queries: int = 1
) -> Variant:
    params = {
        "haystack": haystack,
        "key": key,
        "value": value,
        "keys": keys,
        "values": values,
        "queries": queries,
    }
    return Variant(name, "niah", params)


VARIANTS = {
    v.name: v
    for v in (
        _niah("niah_single_1", "noise", "words", "numbers"),
        _niah("niah_single_2", "essay", "words", "numbers"),
        _niah("niah_single_3", "essay", "words", "uuids"),
        _niah("niah_multikey_1", "essay", "words", "numbers", keys=4),
        _niah("niah_multikey_2", "needle", "words", "numbers"),
        _niah("niah_multikey_3", "needle", "uuids", "uuids"),
        _niah("niah_multivalue", "essay", "words", "numbers", values=4),
        _niah("niah_multiquery", "essay", "words", "numbers", keys=4, queries=4),
        Variant("vt", "vt", {"chains": 1, "hops": 4}),
        Variant("cwe", "cwe", {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10}),
        Variant("fwe", "fwe", {"alpha": 2.0, "coded_wordlen": 6}),
        Variant("qa_1", "qa", {"dataset": "squad"}),
        Variant("qa_2", "qa", {"dataset": "hotpotqa"}),
    )
}
# The suite is the thirteen above; tasks beyond RULER's own are runnable by name but not in it.
SUITE = tuple(VARIANTS)
# The four categories the RULER paper groups the suite into (Hsieh et al. 2024, section 3), in its order.
CATEGORIES = {
    "retrieval": tuple(name for name, variant in VARIANTS.items() if variant.family == "niah"),
    "multi-hop tracing": ("vt",),
    "aggregation": ("cwe", "fwe"),
    "question answering": ("qa_1", "qa_2"),
}
EXTRA_VARIANTS = {"qa_synth": Variant("qa_synth", "qa", {"dataset": "synthetic"})}
ALL_VARIANTS = {**VARIANTS, **EXTRA_VARIANTS}
