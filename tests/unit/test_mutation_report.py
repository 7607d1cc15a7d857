"""scripts/mutation/report.py: one sample run in parts, reported as the union of its
sessions (docs/simulation.md, "Mutation testing"). The sessions are SQLite files with
cosmic-ray 8's tables, written here as cosmic-ray writes them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutation" / "report.py"
OTHER_PART = "in another part of the sample (scripts/mutation/sample.py --part)"
ANNOTATION = "inside a type annotation (never evaluated: from __future__ import annotations)"

SCHEMA = """
CREATE TABLE work_items (job_id VARCHAR NOT NULL, PRIMARY KEY (job_id));
CREATE TABLE mutation_specs (module_path VARCHAR, operator_name VARCHAR, operator_args JSON,
    occurrence INTEGER, start_pos_row INTEGER, start_pos_col INTEGER, end_pos_row INTEGER,
    end_pos_col INTEGER, definition_name VARCHAR, job_id VARCHAR NOT NULL,
    PRIMARY KEY (job_id), FOREIGN KEY(job_id) REFERENCES work_items (job_id));
CREATE TABLE work_results (worker_outcome VARCHAR(9), output TEXT, test_outcome VARCHAR(11),
    diff TEXT, job_id VARCHAR NOT NULL, PRIMARY KEY (job_id),
    FOREIGN KEY(job_id) REFERENCES work_items (job_id));
"""

# (module, row, operator) of the scope's mutants; each session numbers its job ids its own
# way, as separately initialised sessions do
MUTANTS = [("master/a.py", 10, "core/AddNot"), ("master/a.py", 12, "core/NumberReplacer"),
           ("master/b.py", 3, "core/AddNot"), ("master/b.py", 7, "core/RemoveDecorator"),
           ("master/b.py", 9, "core/AddNot"), ("master/c.py", 1, "core/AddNot")]


def session(path: Path, results: dict[int, tuple[str, str | None, str]],
            prefix: str) -> Path:
    """A session of MUTANTS with ``results`` (mutant index -> worker outcome, test outcome,
    output); the others pending."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    for i, (module, row, op) in enumerate(MUTANTS):
        job = f"{prefix}{i}"
        db.execute("INSERT INTO work_items VALUES (?)", (job,))
        db.execute("INSERT INTO mutation_specs VALUES (?, ?, '{}', 0, ?, 4, ?, 9, NULL, ?)",
                   (module, op, row, row, job))
        if i in results:
            worker, test, output = results[i]
            db.execute("INSERT INTO work_results VALUES (?, ?, ?, ?, ?)",
                       (worker, output, test, f"--- diff of {module}:{row}", job))
    db.commit()
    db.close()
    return path


def report(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=60)


KILLED = ("NORMAL", "KILLED", "")
SURVIVED = ("NORMAL", "SURVIVED", "")
TIMEOUT = ("NORMAL", "KILLED", "timeout")
OTHER = ("SKIPPED", None, OTHER_PART)


def test_a_sample_split_after_it_started_is_reported_once_per_mutant(tmp_path: Path) -> None:
    """Both copies hold the results from before the split (mutants 0 and 1) and each
    records the other's part as skipped: every mutant counts once, from the part that
    ran it, and the annotation's mutant is outside the sample."""
    before = {0: KILLED, 1: SURVIVED, 5: ("SKIPPED", None, ANNOTATION)}
    one = session(tmp_path / "one.sqlite", {**before, 2: TIMEOUT, 4: OTHER}, "a")
    two = session(tmp_path / "two.sqlite", {**before, 2: OTHER, 3: SURVIVED}, "a")
    out = report(one, two, "--survivors")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("sample of 5: 4 run, 2 killed (1 by the timeout), 2 survived "
                        "(50 % killed), 1 pending")
    assert f"  {one}: 1 result(s) of its own" in lines
    assert f"  {two}: 1 result(s) of its own" in lines
    assert "  master/a.py: 1 killed, 1 survived" in lines
    assert "  master/b.py: 1 killed, 1 survived" in lines
    assert lines[-2:] == ["master/a.py:12 core/NumberReplacer",
                          "master/b.py:7 core/RemoveDecorator"]


def test_parts_initialised_apart_are_matched_by_where_the_mutants_are(tmp_path: Path) -> None:
    """``sample.py --part`` in two sessions of their own: different job ids, the same
    mutants."""
    skipped = ("SKIPPED", None, ANNOTATION)
    one = session(tmp_path / "one.sqlite", {0: KILLED, 1: SURVIVED, 2: OTHER, 3: OTHER,
                                            4: OTHER, 5: skipped}, "a")
    two = session(tmp_path / "two.sqlite", {0: OTHER, 1: OTHER, 2: KILLED, 3: KILLED,
                                            4: SURVIVED, 5: skipped}, "b")
    out = report(one, two, "--survivors", "--diff")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("sample of 5: 5 run, 3 killed (0 by the timeout), "
                                 "2 survived (60 % killed), 0 pending\n")
    assert "master/b.py:9 core/AddNot\n--- diff of master/b.py:9\n" in out.stdout


def test_two_parts_that_disagree_on_a_mutant_are_shown(tmp_path: Path) -> None:
    one = session(tmp_path / "one.sqlite", {0: KILLED}, "a")
    two = session(tmp_path / "two.sqlite", {0: SURVIVED}, "a")
    out = report(one, two)
    assert out.returncode == 0, out.stderr
    assert "1 conflict" in out.stdout.splitlines()[0]
    assert "conflict: master/a.py:10 core/AddNot: the sessions disagree" in out.stdout


def test_sessions_of_other_mutants_are_refused_naming_them(tmp_path: Path) -> None:
    one = session(tmp_path / "one.sqlite", {}, "a")
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.executescript(SCHEMA)
    db.close()
    out = report(one, other)
    assert out.returncode == 2
    assert "session 2 holds other mutants than session 1" in out.stderr
    missing = report(one, tmp_path / "nowhere.sqlite")
    assert missing.returncode == 2
    assert "nowhere.sqlite: no such session file" in missing.stderr
