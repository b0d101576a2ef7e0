"""Counters: per question, its scheme's counters of released reports, and per declared
cross-tab, its joint counters; a release adds to them (inside its transaction).
"""

from collections import Counter

from ldpsurvey.aggregator.store.connection import Connection


def counts(db: Connection, survey_id: str) -> dict[str, list[int]]:
    """Per question, its scheme's counters (forced response: the count of reports of each
    option), O(questions)."""
    result: dict[str, dict[int, int]] = {}
    for question_id, index, count in db.query(
            "SELECT question_id, option_index, count FROM counts WHERE survey_id = ?",
            (survey_id,)):
        result.setdefault(question_id, {})[index] = int(count)
    return {qid: [by_index[j] for j in sorted(by_index)] for qid, by_index in result.items()}


def joint_counts(db: Connection, survey_id: str, rows: str, cols: str) -> list[list[int]]:
    """A declared cross-tab's counters as a matrix, [row option][col option] (O(cells))."""
    matrix: dict[int, dict[int, int]] = {}
    for i, j, count in db.query(
            "SELECT row_option, col_option, count FROM joint_counts WHERE survey_id = ? AND "
            "row_question = ? AND col_question = ?", (survey_id, rows, cols)):
        matrix.setdefault(int(i), {})[int(j)] = int(count)
    return [[by_col[j] for j in sorted(by_col)] for _, by_col in sorted(matrix.items())]


def add_counts(db: Connection, survey_id: str, deltas: Counter) -> None:
    """Add released reports to the questions' counters: deltas[(question id, counter)]."""
    db.executemany("UPDATE counts SET count = count + ? "
                   "WHERE survey_id = ? AND question_id = ? AND option_index = ?",
                   [(delta, survey_id, qid, index)
                    for (qid, index), delta in sorted(deltas.items())])


def add_joint_counts(db: Connection, survey_id: str, deltas: Counter) -> None:
    """Add released reports to the declared cross-tabs' counters:
    deltas[(row question, col question, row option, col option)]."""
    db.executemany("UPDATE joint_counts SET count = count + ? WHERE survey_id = ? AND "
                   "row_question = ? AND col_question = ? AND row_option = ? AND col_option = ?",
                   [(delta, survey_id, *cell) for cell, delta in sorted(deltas.items())])
