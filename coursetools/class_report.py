r"""What the class got wrong: one report per lesson, read from nbgrader's autograded notebooks.

    make class-report                                    # every autograded lesson of build/nbgrader
    python -m coursetools.class_report --course build/nbgrader --out build/class-report [LESSON ...]
    python -m coursetools.class_report ... --names       # who made each mistake (off by default)

Run it after ``nbgrader autograde``. In grading mode every check shows its verdict with the check's
name and a stable mistake id in the output's metadata (``capsedu.course.checks._kit.TRACE_KEY``):
``passed``, ``stub``, a named mistake (``squared-length``), ``raised``, or ``other-<kind>`` for a
wrong answer that matches no named mistake. For each check cell of a lesson (nbgrader's autograded
test cells, found by their ``grade_id``, so a cell moved in a learner's notebook still counts) the
report counts the learners per verdict and shows the hint they read. A check cell without a verdict
counts as ``cell-error`` (the cell raised before its check answered: a name the learner deleted),
``no-verdict`` (it printed none) or ``cell-missing`` (the learner deleted the cell).

It writes ``LESSON.html`` (a static page: a table and a bar chart per check, drawn with the course's
palette) and ``LESSON.csv`` per lesson, and ``index.html``. Anonymous by default: counts only;
``--names`` adds who made each mistake. Learners in nbgrader's gradebook without an autograded
submission are counted apart, never among the verdicts.

Shape legend: none (no tensors).
"""

from __future__ import annotations

import argparse
import csv
import html
import io
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from matplotlib.figure import Figure

from capsedu.course.checks._kit import FAILED, PASSED, TRACE_KEY
from capsedu.explore.palette import BLUE, MUTED_TEXT, VERMILLION

NO_CHECK = {"cell-error": "the cell raised before its check answered",
            "no-verdict": "the cell printed no verdict (not run?)",
            "cell-missing": "the check cell is not in the submitted notebook"}
CSV_FIELDS = ("lesson", "cell", "check", "verdict", "learners", "share", "hint", "names")


@dataclass(frozen=True)
class Verdict:
    r"""One learner's verdict in one check cell: the check, the id, the hint the learner read."""

    check: str
    mistake: str
    hint: str = ""


@dataclass
class CheckCell:
    r"""One autograded check cell of a lesson, and every submitted learner's verdict in it."""

    grade_id: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # learner -> verdict

    @property
    def function_name(self) -> str:
        r"""The check function this cell called (the most common name among the verdicts)."""
        names = [v.check for v in self.verdicts.values() if v.check]
        return Counter(names).most_common(1)[0][0] if names else ""

    def rows(self) -> list[tuple[str, list[str], str]]:
        r"""``(verdict id, learners, the hint most of them read)``: passed first, then by count."""
        by_id: dict[str, list[str]] = defaultdict(list)
        for learner, verdict in sorted(self.verdicts.items()):
            by_id[verdict.mistake].append(learner)
        order = sorted(by_id, key=lambda m: (m != "passed", -len(by_id[m]), m))
        return [(m, by_id[m], self._common_hint(m)) for m in order]

    def _common_hint(self, mistake_id: str) -> str:
        hints = Counter(v.hint for v in self.verdicts.values() if v.mistake == mistake_id)
        text, _ = hints.most_common(1)[0]
        variants = len(hints)
        return text + (f" ({variants} wordings: the numbers in it differ)" if variants > 1 else "")


@dataclass
class LessonReport:
    r"""A lesson's check cells, its learners with a submission, and those without one."""

    lesson: str
    cells: list[CheckCell]
    submitted: list[str]
    missing: list[str]


def verdict_of(cell: nbformat.NotebookNode | None) -> Verdict:
    r"""The verdict a check cell's outputs show: its last traced check, else why there is none."""
    if cell is None:
        return Verdict("", "cell-missing", NO_CHECK["cell-missing"])
    outputs = cell.get("outputs", [])
    traced = [o for o in outputs if o.get("output_type") == "display_data"
              and TRACE_KEY in o.get("metadata", {})]
    if traced:
        trace, text = traced[-1]["metadata"][TRACE_KEY], traced[-1]["data"].get("text/plain", "")
        return Verdict(trace.get("check", ""), trace.get("mistake", ""), _hint_text(text))
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if errors:
        return Verdict("", "cell-error", f"{errors[-1].get('ename')}: {errors[-1].get('evalue')}")
    return Verdict("", "no-verdict", NO_CHECK["no-verdict"])


def _hint_text(text: str | list[str]) -> str:
    text = "".join(text) if isinstance(text, list) else text
    for mark in (PASSED, FAILED):
        text = text.removeprefix(mark)
    return text.strip()


def graded_cell_ids(notebook: nbformat.NotebookNode) -> list[str]:
    r"""The ``grade_id`` of every autograded test cell of a release (nbgrader's metadata), in order."""
    ids = []
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and "points" in meta:
            ids.append(meta["grade_id"])
    return ids


def _cells_by_id(notebook: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells
            if "grade_id" in c.get("metadata", {}).get("nbgrader", {})}


def lesson_report(course: Path, lesson: str, learners: Iterable[str] = ()) -> LessonReport:
    r"""The verdicts of every learner with an autograded ``lesson`` in the nbgrader ``course``
    folder; ``learners`` (nbgrader's gradebook) adds those without a submission."""
    sources = sorted((course / "source" / lesson).glob("*.ipynb"))
    if not sources:
        raise FileNotFoundError(f"{course / 'source' / lesson} holds no notebook: is {lesson!r} an "
                                "assignment of this course (python -m coursetools.grading)?")
    cells = [CheckCell(f"{source.stem}/{gid}") for source in sources
             for gid in graded_cell_ids(nbformat.read(source, as_version=4))]
    autograded = course / "autograded"
    submitted = sorted(p.parent.name for p in autograded.glob(f"*/{lesson}") if p.is_dir())
    for learner in submitted:
        for source in sources:
            path = autograded / learner / lesson / source.name
            by_id = _cells_by_id(nbformat.read(path, as_version=4)) if path.is_file() else {}
            for cell in cells:
                notebook, gid = cell.grade_id.split("/", 1)
                if notebook == source.stem:
                    cell.verdicts[learner] = verdict_of(by_id.get(gid))
    missing = sorted(set(learners) - set(submitted))
    return LessonReport(lesson, cells, submitted, missing)


def gradebook_learners(course: Path) -> list[str]:
    r"""Every learner in the course's nbgrader gradebook, or [] without one (or without nbgrader)."""
    database = course / "gradebook.db"
    if not database.is_file():
        return []
    try:
        from nbgrader.api import Gradebook
    except ImportError:
        return []
    with Gradebook(f"sqlite:///{database}") as gradebook:
        return sorted(student.id for student in gradebook.students)


def csv_rows(report: LessonReport, *, names: bool) -> list[dict[str, str]]:
    r"""One row per (check cell, verdict); ``names`` only with ``names=True``."""
    rows = []
    for cell in report.cells:
        for mistake_id, who, hint in cell.rows():
            rows.append({"lesson": report.lesson, "cell": cell.grade_id, "check": cell.function_name,
                         "verdict": mistake_id, "learners": str(len(who)),
                         "share": f"{len(who) / max(len(report.submitted), 1):.2f}", "hint": hint,
                         "names": " ".join(who) if names else ""})
    return rows


def write_csv(report: LessonReport, path: Path, *, names: bool) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f for f in CSV_FIELDS if names or f != "names"])
        writer.writeheader()
        for row in csv_rows(report, names=names):
            writer.writerow({k: v for k, v in row.items() if names or k != "names"})


def bar_chart(cell: CheckCell, learners: int) -> Figure:
    r"""Learners per verdict of one check cell: passed in blue, mistakes in vermillion (hatched)."""
    rows = cell.rows()
    figure = Figure(figsize=(6.0, 0.45 * len(rows) + 0.7), layout="constrained")
    ax = figure.add_subplot()
    counts = [len(who) for _, who, _ in rows]
    for y, (mistake_id, _, _) in enumerate(rows):
        ok = mistake_id == "passed"
        ax.barh(y, counts[y], color=BLUE if ok else VERMILLION, hatch="" if ok else "//",
                edgecolor="white")
    ax.set_yticks(range(len(rows)), [m for m, _, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, max(learners, 1))
    ax.set_xlabel(f"learners (of {learners} who submitted)", color=MUTED_TEXT)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    return figure


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}}
table{{border-collapse:collapse;margin:.5rem 0 2rem}}td,th{{border:1px solid #999;padding:.3rem .5rem;
text-align:left;vertical-align:top}}td.n{{text-align:right}}figure{{margin:0}}svg{{max-width:100%;height:auto}}
</style></head><body>
{body}
</body></html>
"""


def _cell_section(cell: CheckCell, report: LessonReport, names: bool) -> str:
    learners = len(report.submitted)
    head = "<tr><th>verdict</th><th>learners</th><th>what the check told them</th>"
    head += "<th>who</th></tr>" if names else "</tr>"
    notebook, gid = cell.grade_id.split("/", 1)
    title = f"Exercise {gid.rsplit('-', 1)[-1]}" + (f" of {notebook}" if notebook != report.lesson else "")
    lines = [f"<h2>{html.escape(title)}: <code>{html.escape(cell.function_name or '?')}</code></h2>",
             f'<figure role="img" aria-label="learners per verdict of {html.escape(cell.grade_id)}">'
             f"{_svg(bar_chart(cell, learners))}</figure>", f"<table>{head}"]
    for mistake_id, who, hint in cell.rows():
        row = (f"<tr><td><code>{html.escape(mistake_id)}</code></td><td class=n>{len(who)}</td>"
               f"<td>{html.escape(hint)}</td>")
        lines.append(row + (f"<td>{html.escape(', '.join(who))}</td></tr>" if names else "</tr>"))
    return "\n".join(lines) + "\n</table>"


def lesson_page(report: LessonReport, *, names: bool) -> str:
    r"""The lesson's report as one static HTML page."""
    title = f"What the class got wrong: {report.lesson}"
    absent = (f"{len(report.missing)} learner(s) in the gradebook have no autograded submission "
              "and are not counted below" + (f": {', '.join(report.missing)}" if names else "") + ".")
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p>{len(report.submitted)} learner(s) submitted and were autograded. "
            f"{html.escape(absent)} {'Names are shown (--names).' if names else 'Counts only: no names.'}</p>"]
    body += [_cell_section(cell, report, names) for cell in report.cells]
    return PAGE.format(title=html.escape(title), body="\n".join(body))


def write_reports(course: Path, out: Path, lessons: Sequence[str] = (), *, names: bool = False) -> list[Path]:
    r"""``LESSON.html`` and ``LESSON.csv`` for each autograded lesson (all, or ``lessons``), and
    ``index.html``; the pages written."""
    if not (course / "source").is_dir():
        raise FileNotFoundError(f"course={course} is not an nbgrader course folder (no source/): "
                                "give the folder `make grading` wrote")
    chosen = list(lessons) or sorted({p.name for p in (course / "autograded").glob("*/*") if p.is_dir()})
    if not chosen:
        raise FileNotFoundError(f"nothing is autograded in {course / 'autograded'}: run "
                                "`nbgrader autograde LESSON` first")
    out.mkdir(parents=True, exist_ok=True)
    learners, pages = gradebook_learners(course), []
    for lesson in chosen:
        report = lesson_report(course, lesson, learners)
        (out / f"{lesson}.html").write_text(lesson_page(report, names=names))
        write_csv(report, out / f"{lesson}.csv", names=names)
        pages.append(out / f"{lesson}.html")
    links = "".join(f'<li><a href="{p.name}">{html.escape(p.stem)}</a> (<a href="{p.stem}.csv">CSV</a>)</li>'
                    for p in pages)
    (out / "index.html").write_text(PAGE.format(title="What the class got wrong",
                                                body=f"<h1>What the class got wrong</h1><ul>{links}</ul>"))
    return pages


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(prog="python -m coursetools.class_report",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="assignment names, e.g. 01_squash (default: all autograded)")
    parser.add_argument("--course", type=Path, default=Path("build/nbgrader"), help="nbgrader course folder")
    parser.add_argument("--out", type=Path, default=Path("build/class-report"), help="folder for the reports")
    parser.add_argument("--names", action="store_true", help="show who made each mistake (off: counts only)")
    args = parser.parse_args(argv)
    pages = write_reports(args.course, args.out, args.lessons, names=args.names)
    print(f"wrote {len(pages)} lesson report(s) to {args.out}/ - open {args.out / 'index.html'}")
    return pages


if __name__ == "__main__":
    main()
