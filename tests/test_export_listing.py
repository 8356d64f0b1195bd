"""fathom export listing: logs of training users, actions and six-digit ids that no evaluation log
draws, the answer one id a line; export-check finding an evaluation id or condition planted from the
run's own records."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.prompts import log_records as logs
from fathom.tasks.listing import draw_log

ID = re.compile(r"#(\d+) 2024-03-\d\d \d\d:\d\d \| user=(\w+) \| action=(\w+) \|")


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_log_spaces_are_pinned_and_apart() -> None:
    assert (logs.EVAL_LOGS.ids.start, logs.EVAL_LOGS.ids.stop) == (10_000, 100_000)
    assert (logs.TRAIN_LOGS.ids.start, logs.TRAIN_LOGS.ids.stop) == (100_000, 1_000_000)
    assert not set(logs.TRAIN_LOGS.users) & set(logs.USERS)
    assert not set(logs.TRAIN_LOGS.actions) & set(logs.ACTIONS)
    assert logs.EVAL_LOGS.stream == () and logs.TRAIN_LOGS.stream == ("train",)
    # The id reader reads five digits and no more: a training id is none, the last evaluation one is.
    assert logs.ids_in("#99999 #100000 #999999") == ["#99999"]


def test_training_and_evaluation_logs_never_share_an_id_user_or_action() -> None:
    drawn: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for name, space in (("eval", logs.EVAL_LOGS), ("train", logs.TRAIN_LOGS)):
        ids, users, actions = drawn.setdefault(name, (set(), set(), set()))
        for seed in range(150):
            log = draw_log(random.Random(seed), 1 + seed % 40, space)
            for line in log.lines:
                found = ID.match(line)
                assert found is not None, line
                ids.add(found.group(1))
                users.add(found.group(2))
                actions.add(found.group(3))
            assert set(log.matching) <= {f"#{i}" for i in ids}
    for eval_part, train_part in zip(drawn["eval"], drawn["train"], strict=True):
        assert eval_part and train_part and not eval_part & train_part
    assert {len(i) for i in drawn["eval"][0]} == {5} and {len(i) for i in drawn["train"][0]} == {6}
    assert drawn["eval"][1] == set(logs.USERS) and drawn["train"][1] == set(logs.TRAIN_LOGS.users)


def test_evaluation_logs_are_drawn_as_before() -> None:
    # What draw_log drew before the training part existed (commit 9502db3), for Random(7) and 2 items.
    log = draw_log(random.Random(7), 2)
    assert log.lines == (
        "#61750 2024-03-05 06:48 | user=bruno | action=purchase | amount=565",
        "#95319 2024-03-17 15:25 | user=farah | action=purchase | amount=947",
        "#16328 2024-03-25 09:19 | user=farah | action=login | amount=630",
        "#19494 2024-03-27 12:33 | user=farah | action=purchase | amount=583",
    )
    assert (log.user, log.action, log.matching) == ("farah", "purchase", ("#95319", "#19494"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("listing-export")
    assert cli("run", "listing", "--model", "sim:perfect", "--tokenizer", "cl100k_base", "--lengths", "4k",
               "--items", "4,16", "--samples", "3", "--run-dir", root / "run") == 0  # fmt: skip
    assert cli("export", "listing", "--count", "6", "--lengths", "4k", "--items", "4,16", "--tokenizer",
               "cl100k_base", "--out", root / "train.jsonl") == 0  # fmt: skip
    return root


def test_a_listing_export_lists_its_matching_ids_one_a_line(exported: Path) -> None:
    rows = lines(exported / "train.jsonl")
    assert len(rows) == 6 and {row["meta"]["task"] for row in rows} == {"listing:4", "listing:16"}
    for row in rows:
        user, answer = row["messages"][-2]["content"], row["messages"][-1]["content"]
        asked = re.search(r"with `user=(\w+) \| action=(\w+) \|`", user)
        assert asked is not None and asked.group(1) in logs.TRAIN_LOGS.users
        # The answer: "Answer:", then each id of a record that matches, in order, one a line.
        matching = [f"#{i}" for i, u, a in ID.findall(user) if (u, a) == asked.groups()]
        assert answer.split("\n") == ["Answer:", *matching] == ["Answer:", *row["meta"]["answers"]]
        assert len(matching) == int(row["meta"]["task"].split(":")[1]) and row["meta"]["length"] == 4096
        # The ask's example id has the training ids' six digits (evaluation's has five, as its ids).
        assert user.endswith("one id per line (like #000000), and nothing else.")
        assert all(len(i) == 6 for i, _, _ in ID.findall(user))
    run_prompt = logs.question("alice", "refund", logs.EVAL_LOGS.example)
    assert run_prompt.endswith("one id per line (like #00000), and nothing else.")


def test_a_listing_export_shares_nothing_with_the_run(
    exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("export-check", exported / "train.jsonl", exported / "run") == 0
    assert capsys.readouterr().out.startswith("no overlap")


def _planted(exported: Path, tmp_path: Path, old: str, new: str) -> Path:
    rows = lines(exported / "train.jsonl")
    user = rows[0]["messages"][-2]
    assert old in user["content"]
    user["content"] = user["content"].replace(old, new, 1)
    out = tmp_path / "planted.jsonl"
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return out


def test_an_evaluation_id_or_condition_planted_in_a_listing_export_is_found(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Planted from the run's records as samples.jsonl holds them.
    record = next(r for r in lines(exported / "run" / "samples.jsonl") if not r.get("control"))
    train_id = ID.search(lines(exported / "train.jsonl")[0]["messages"][-2]["content"])
    assert train_id is not None
    eval_id = record["answers"][0]
    planted = _planted(exported, tmp_path, f"#{train_id.group(1)}", eval_id)
    capsys.readouterr()
    assert cli("export-check", planted, exported / "run") == 1
    assert f"value '{eval_id}'" in capsys.readouterr().out
    user = re.search(r"user=(\w+) \| action=(\w+)", record["question"])
    assert user is not None
    planted = _planted(exported, tmp_path, f"user={train_id.group(2)}", f"user={user.group(1)}")
    capsys.readouterr()
    assert cli("export-check", planted, exported / "run") == 1
    assert f"name 'user={user.group(1)}'" in capsys.readouterr().out


def test_a_bad_listing_export_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert cli("export", "listing", "--count", "2", "--lengths", "1k", "--items", "128", "--out", out) == 2
    err = capsys.readouterr().err
    assert "--items 128 does not fit" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
