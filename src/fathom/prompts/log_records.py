"""Log records for the long-output task (``fathom.tasks.listing``): how a record reads, how the
question names the condition it asks for, and how a record's id is found again in any text (an
answer, or a simulated model's reading of the context).

A record is one line, ``#40417 2024-03-07 14:02 | user=alice | action=refund | amount=120``; its id
(``#`` and five digits) is what an answer lists. The condition is a user and an action together:
the question names them in the words the records use (``user=alice | action=refund |``), so that a
simulated reader that looks for that text finds every matching record and no look-alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

USERS = ("alice", "bruno", "chen", "dmitri", "esther", "farah", "gustav", "hana")
ACTIONS = ("refund", "purchase", "login", "transfer", "upload", "logout")
ID_DIGITS = 5
IDS = range(10 ** (ID_DIGITS - 1), 10**ID_DIGITS)
_ID = re.compile(rf"#(\d{{{ID_DIGITS}}})(?!\d)")
_ASKED = re.compile(r"with `(user=\w+ \| action=\w+ \|)`")


# Each day's date and each minute's time, written once: a 128k prompt's hundreds of records spent more
# on formatting them field by field than on the rest of their drawing.
_DATES = tuple(f"2024-03-{day:02d}" for day in range(32))
_TIMES = tuple(f"{minute // 60:02d}:{minute % 60:02d}" for minute in range(24 * 60))


def record(ident: int, day: int, minute: int, user: str, action: str, amount: int) -> str:
    """One record's line: ``day`` of March 2024 (1 to 31), ``minute`` of the day, an amount."""
    return f"#{ident} {_DATES[day]} {_TIMES[minute]} | user={user} | action={action} | amount={amount}"


def condition(user: str, action: str) -> str:
    """The text every matching record holds and no other does."""
    return f"user={user} | action={action} |"


def question(user: str, action: str, example: str = "#00000") -> str:
    """The ask, with an id of the log's shape as its example (``LogSpace.example``)."""
    return (
        f"List the id of every log record in the document with `{condition(user, action)}`, in the "
        f"order they appear, one id per line (like {example}), and nothing else."
    )


def asked(question_text: str) -> str | None:
    """The condition a listing question asks for, or None for any other question."""
    found = _ASKED.search(question_text)
    return None if found is None else found.group(1)


def ids_in(text: str) -> list[str]:
    """Every record id ``text`` names, in order, as ``#12345``, repeats kept."""
    return [f"#{digits}" for digits in _ID.findall(text)]


def listed(ids: list[str]) -> str:
    """The answer that lists ``ids``: one a line."""
    return "\n".join(ids)


@dataclass(frozen=True)
class LogSpace:
    """What a log's records draw: its users, actions and ids, and the words mixed into each sample's
    random stream beside the seed and the cell (none for evaluation's, whose streams are what they
    always were)."""

    users: tuple[str, ...]
    actions: tuple[str, ...]
    ids: range
    stream: tuple[str, ...] = ()

    @property
    def example(self) -> str:
        """An id of this log's shape for the question to show: as many zeros as its ids have digits."""
        return "#" + "0" * len(str(self.ids.start))


EVAL_LOGS = LogSpace(USERS, ACTIONS, IDS)
# ``fathom export``'s: no user or action of evaluation's, and six-digit ids where evaluation's have five
# (``ids_in`` finds none of them: it reads five digits and no more).
TRAIN_LOGS = LogSpace(
    ("camille", "joaquin", "yuki", "oskar", "priya", "tomas", "ines", "kofi"),
    ("deposit", "signup", "download", "delete", "renewal", "export"),
    range(10**ID_DIGITS, 10 ** (ID_DIGITS + 1)),
    ("train",),
)
