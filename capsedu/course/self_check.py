r"""Self-check questions at the end of each lesson: multiple choice, instant feedback, no kernel needed.

Each lesson's questions live in ``capsedu/course/self_checks/NN.json`` (not in the lesson, so no
answer is in view while the learner reads)::

    {"questions": [{"prompt": "...", "options": ["...", "...", "..."], "answer": 1,
                    "explanation": "why option 1 is right", "feedback": {"0": "why 0 is not"}}]}

:func:`self_check` renders them as plain HTML: every option is a ``<details>`` element whose
hidden part says whether it is right and explains the right answer. Clicking (or pressing Enter
on) an option opens its feedback - in JupyterLab and on the static website alike, with no
JavaScript and no kernel, and the browser makes it keyboard- and screen-reader-accessible. The
questions are not graded.

Shape legend: none (no tensors here).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from importlib import resources

FOLDER = "self_checks"


@dataclass(frozen=True)
class Question:
    r"""One multiple-choice question: ``options[answer]`` is right, ``explanation`` says why."""

    prompt: str
    options: tuple[str, ...]
    answer: int
    explanation: str
    feedback: dict[int, str] = field(default_factory=dict)  # why a wrong option is wrong

    def __post_init__(self) -> None:
        if len(self.options) < 2:
            raise ValueError(f"options must hold at least 2 choices, got {len(self.options)}: {self.prompt!r}")
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"answer must index options (0..{len(self.options) - 1}), got {self.answer}")
        if not self.explanation.strip():
            raise ValueError(f"explanation must say why the answer is right: {self.prompt!r}")
        if self.answer in self.feedback or any(not 0 <= k < len(self.options) for k in self.feedback):
            raise ValueError(f"feedback must be keyed by wrong options only, got {sorted(self.feedback)}")

    def reply(self, choice: int) -> str:
        r"""What choosing ``options[choice]`` shows: right or not, then the explanation."""
        if choice == self.answer:
            return f"✅ Right. {self.explanation}"
        why = self.feedback.get(choice, "")
        return f"❌ Not this one.{' ' + why if why else ''} Try another option."


@dataclass(frozen=True)
class SelfCheck:
    r"""A lesson's questions; shows as HTML in a notebook and on the website."""

    lesson: str
    questions: tuple[Question, ...]

    def _repr_html_(self) -> str:
        parts = [f'<div class="capsedu-self-check" role="list" aria-label="Self-check questions, lesson {self.lesson}">']
        for number, question in enumerate(self.questions, start=1):
            parts.append(f'<div role="listitem" style="margin:0.8em 0">'
                         f'<p><strong>{number}.</strong> {html.escape(question.prompt)}</p>')
            for choice, option in enumerate(question.options):
                letter = chr(ord("A") + choice)
                parts.append(
                    '<details style="margin:0.2em 0 0.2em 1.2em">'
                    f'<summary style="cursor:pointer">{letter}. {html.escape(option)}</summary>'
                    f'<p style="margin:0.3em 0 0.5em 1.2em">{html.escape(question.reply(choice))}</p>'
                    "</details>")
            parts.append("</div>")
        parts.append("</div>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        lines = [f"Self-check, lesson {self.lesson} (open in JupyterLab or on the website to answer):"]
        for number, question in enumerate(self.questions, start=1):
            lines.append(f"{number}. {question.prompt}")
            lines += [f"   {chr(ord('A') + c)}. {o}" for c, o in enumerate(question.options)]
        return "\n".join(lines)


def _question(entry: dict) -> Question:
    return Question(prompt=entry["prompt"], options=tuple(entry["options"]), answer=entry["answer"],
                    explanation=entry["explanation"],
                    feedback={int(k): v for k, v in entry.get("feedback", {}).items()})


def questions_for(lesson: str) -> tuple[Question, ...]:
    r"""The questions of ``lesson`` (its two-digit number, e.g. ``"01"``)."""
    if not (isinstance(lesson, str) and len(lesson) == 2 and lesson.isdigit()):
        raise ValueError(f"lesson must be a lesson's two-digit number such as '01', got {lesson!r}")
    path = resources.files("capsedu.course").joinpath(FOLDER, f"{lesson}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no self-check questions for lesson {lesson} ({FOLDER}/{lesson}.json)")
    return tuple(_question(entry) for entry in json.loads(path.read_text(encoding="utf-8"))["questions"])


def self_check(lesson: str) -> SelfCheck:
    r"""The self-check questions of ``lesson`` (e.g. ``"01"``), shown by the cell that returns it."""
    return SelfCheck(lesson, questions_for(lesson))
