r"""What learners get on a JupyterHub: the learner repository that nbgitpuller pulls, and its link.

On a hub, nbgitpuller brings the course into each learner's home. It should bring what ``make
lab`` gives a learner on their own machine (``coursetools/workspace.py``) - the lessons with their
exercises stubbed, and the worked lessons beside them - not the course's repository with every
solution in plain view. So an instructor publishes a *learner repository*::

    python -m coursetools.hub publish ../capsedu-learner --withhold 01_squash
    # then push it where the hub can reach it (GitHub, GitLab, the hub's own git server)

What the learner repository holds (and the learner's ``~/capsedu`` after the pull)::

    NN_name.ipynb          the lesson, exercises to write (solutions stubbed, no outputs)
    worked/NN_name.worked.ipynb  the complete lesson with its outputs, to compare with afterwards
    training_record.md     how the shipped networks were trained (the lessons link to it; also in worked/)
    statistics.md          the statistics the lessons use (standard errors, paired tests, seeds)
    README.md              what this folder is

A lesson given as a graded assignment is *withheld*: neither its stubbed nor its worked copy is
published, because it travels through nbgrader's exchange (released, fetched, submitted,
collected, autograded, feedback returned); publish again without ``--withhold`` once the
assignment is closed, and the next pull brings it. Every publish is a commit; nbgitpuller's merge
on the learner's side keeps what a learner edited (``git merge -Xours``) and brings the rest.

``python -m coursetools.hub link HUB REPO`` prints the nbgitpuller link to hand out;
``python -m coursetools.hub settle-lab`` writes the course's JupyterLab defaults (no news prompt,
no update check) into the environment that runs the learners' servers.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import subprocess
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import nbformat

from coursetools.handouts import LESSONS, copy_pages, student_notebook, worked_name
from coursetools.workspace import settle_lab_settings

TARGET = "capsedu"  # the folder in each learner's home that nbgitpuller pulls into
README = """# capsedu - your lessons

Pulled into your home by nbgitpuller. Work in `NN_name.ipynb` (the exercises are yours to write;
run each lesson top to bottom, the checks tell you what to fix). `worked/` holds the complete
lessons with their outputs (`NN_name.worked.ipynb`), to compare with afterwards. Opening the course's link again brings new
lessons and keeps what you edited. Graded assignments are not here: fetch them from JupyterLab's
*Assignments* tab (nbgrader).
"""


def lesson_names(lessons: Path = LESSONS) -> list[str]:
    r"""The lessons' names (``NN_name``) in the folder ``lessons``."""
    names = sorted(p.stem for p in Path(lessons).glob("[0-9][0-9]_*.ipynb"))
    if not names:
        raise FileNotFoundError(f"lessons={lessons}: no lesson notebooks (NN_name.ipynb) there")
    return names


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}:\n{result.stderr}")
    return result.stdout.strip()


def write_learner_files(dest: Path, withhold: Sequence[str] = (), lessons: Path = LESSONS) -> list[str]:
    r"""Write the learner's files into ``dest`` (removing withdrawn ones); the lessons published."""
    names = lesson_names(lessons)
    unknown = sorted(set(withhold) - set(names))
    if unknown:
        raise ValueError(f"withhold={unknown}: not lessons of the course (expected names like {names[1]})")
    published = [name for name in names if name not in withhold]
    (dest / "worked").mkdir(parents=True, exist_ok=True)
    keep = {f"{name}.ipynb" for name in published} | {worked_name(name) for name in published}
    for stale in [*dest.glob("[0-9][0-9]_*.ipynb"), *(dest / "worked").glob("[0-9][0-9]_*.ipynb")]:
        if stale.name not in keep:  # withdrawn lessons, and worked copies under an earlier name
            stale.unlink()
    for name in published:
        notebook = nbformat.read(Path(lessons) / f"{name}.ipynb", as_version=4)
        nbformat.write(student_notebook(notebook), dest / f"{name}.ipynb")
        nbformat.write(notebook, dest / "worked" / worked_name(name))
    copy_pages(dest, lessons)
    copy_pages(dest / "worked", lessons)
    (dest / "README.md").write_text(README)
    return published


def publish(dest: str | Path, withhold: Sequence[str] = (), lessons: Path = LESSONS,
            branch: str = "main") -> str:
    r"""Create or update the learner repository at ``dest`` and commit; the commit's hash."""
    dest = Path(dest)
    if (dest / ".git").is_dir():
        readme = dest / "README.md"
        if not (readme.is_file() and readme.read_text().startswith(README.splitlines()[0])):
            raise ValueError(f"dest={dest}: a git repository that is not a capsedu learner repository "
                             "(its README.md is not the learner README); publish into a new folder")
    elif dest.exists() and any(dest.iterdir()):
        raise ValueError(f"dest={dest}: a folder with files that is not a learner repository; "
                         "expected a new folder or one that publish made")
    else:
        dest.mkdir(parents=True, exist_ok=True)
        _git(dest, "init", "--quiet", "--initial-branch", branch)
    published = write_learner_files(dest, withhold, lessons)
    _git(dest, "add", "--all")
    if _git(dest, "status", "--porcelain"):
        withheld = f"; withheld (graded): {', '.join(withhold)}" if withhold else ""
        _git(dest, "-c", "user.name=capsedu", "-c", "user.email=capsedu@localhost", "commit", "--quiet",
             "-m", f"capsedu learner files: {len(published)} lessons{withheld}")
    return _git(dest, "rev-parse", "HEAD")


def pull_link(hub: str, repo: str, branch: str = "main", open_path: str = "00_start_here.ipynb") -> str:
    r"""The nbgitpuller link: pulls ``repo`` into ``~/capsedu`` and opens ``open_path`` in JupyterLab."""
    if not hub.startswith(("http://", "https://")):
        raise ValueError(f"hub={hub!r}: expected the hub's address, starting with http:// or https://")
    query = urllib.parse.urlencode({"repo": repo, "branch": branch, "targetpath": TARGET,
                                    "urlpath": f"lab/tree/{TARGET}/{open_path}"})
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def main(argv: list[str] | None = None) -> str:
    r"""The command line: ``publish``, ``link`` or ``settle-lab``; what it printed."""
    parser = argparse.ArgumentParser(prog="python -m coursetools.hub", description=__doc__.split("\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    publish_parser = actions.add_parser("publish", help="create or update the learner repository")
    publish_parser.add_argument("dest", type=Path, help="the learner repository's folder (created if missing)")
    publish_parser.add_argument("--withhold", nargs="*", default=[], metavar="NN_name",
                                help="lessons given as graded assignments (they travel through nbgrader)")
    link_parser = actions.add_parser("link", help="print the nbgitpuller link for learners")
    link_parser.add_argument("hub", help="the hub's address, e.g. https://hub.example.org")
    link_parser.add_argument("repo", help="where the hub pulls the learner repository from (a git URL)")
    link_parser.add_argument("--branch", default="main")
    actions.add_parser("settle-lab", help="write the course's JupyterLab defaults into this environment")
    args = parser.parse_args(argv)
    if args.action == "settle-lab":
        result = str(settle_lab_settings())
        print(f"wrote {result}")
    elif args.action == "publish":
        result = publish(args.dest, args.withhold)
        print(f"learner repository {args.dest.resolve()} at commit {result}")
    else:
        result = pull_link(args.hub, args.repo, args.branch)
        print(result)
    return result


if __name__ == "__main__":
    main()
