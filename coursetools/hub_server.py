r"""The class hub on one machine, in one command: ``make hub`` (``python -m coursetools.hub_server``).

    sudo make hub HUB_ARGS="--instructors alan --learners 'ada grace' --withhold 01_squash"

Run as root in the course's folder (PAM logs learners in with their system accounts and every
learner's server runs as that account). It prepares what ``classroom/jupyterhub_config.py`` needs
around it and runs the hub until Ctrl+C:

1. the hub's state folder (its database and cookie secret; mode 700), nbgrader's exchange
   (mode 1777: every learner writes into it) and the folder the learner repository is served
   from (mode 755), each created only when absent: an existing folder is never changed, only
   checked, and the command stops naming what to change when its owner or mode is wrong;
2. configurable-http-proxy: the one on ``PATH``, else ``npm ci --ignore-scripts`` of the
   lockfile ``classroom/proxy/package-lock.json`` (pinned, integrity-checked) into a cache;
3. two checks on what the hub runs: that learner accounts can reach the course's environment
   and folders (a Python under root's home, mode 700, is the usual trap), and that nothing root
   executes - the clone, its ``.venv``, the Python - lies where another account could change it
   (a folder owned by someone else, or writable by group or others); each names the path;
4. the learner repository (``coursetools.hub.publish``) in ``REPOS/capsedu-learner``, served
   read-only by ``git daemon`` on 127.0.0.1, as the unprivileged ``--git-user`` (nobody) when
   run as root - nbgitpuller, running as the learner, clones it over ``git://``, so no account
   has to own it;
5. the course's JupyterLab defaults in the environment (``coursetools.hub settle-lab``), then
   JupyterHub with ``classroom/jupyterhub_config.py``; the nbgitpuller link is printed.

``tests/test_hub.py`` runs this command with the arguments ``classroom/README.md`` gives, adding
its own folders, ports (``--config``) and ``--no-access-check`` (its servers all run as one
account: it cannot create system users).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from coursetools.handouts import LESSONS
from coursetools.hub import publish, pull_link
from coursetools.workspace import settle_lab_settings

REPO = LESSONS.parent
CLASSROOM_CONFIG = REPO / "classroom" / "jupyterhub_config.py"
LEARNER_REPO = "capsedu-learner"  # its folder under STATE/repos, and its name in the git:// URL
PROXY_LOCK = REPO / "classroom" / "proxy"  # package.json and package-lock.json: the pinned proxy
PROXY_CACHE = Path.home() / ".cache" / "capsedu" / "hub"


def proxy_command(cache: Path = PROXY_CACHE, lock: Path = PROXY_LOCK) -> str:
    r"""configurable-http-proxy: on ``PATH``, else installed once into ``cache`` by ``npm ci
    --ignore-scripts`` from the lockfile in ``lock`` (every package pinned with its integrity
    hash, no install script run)."""
    found = shutil.which("configurable-http-proxy")
    local = Path(cache) / "node_modules" / ".bin" / "configurable-http-proxy"
    if found or (local.exists() and _same_lock(Path(cache), Path(lock))):
        return found or str(local)
    if shutil.which("npm") is None:
        raise RuntimeError("npm is missing: it installs configurable-http-proxy, JupyterHub's proxy "
                           "(Debian: apt-get install -y npm)")
    Path(cache).mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(Path(lock) / name, Path(cache) / name)
    result = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=cache,
                            capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0 or not local.exists():
        raise RuntimeError(f"npm ci could not install the proxy of {lock}/package-lock.json into "
                           f"{cache}:\n{result.stderr[-1000:]}")
    return str(local)


def _same_lock(cache: Path, lock: Path) -> bool:
    r"""Whether ``cache`` holds an install of ``lock``'s lockfile (not an older, unpinned one)."""
    installed = cache / "package-lock.json"
    return installed.is_file() and installed.read_bytes() == (lock / "package-lock.json").read_bytes()


def blocked_by(path: Path) -> Path | None:
    r"""The first folder on the way to ``path`` that other accounts cannot enter, or ``path`` itself
    when they cannot read it; None when an account that is neither owner nor group gets there."""
    path = Path(path).resolve()
    for folder in reversed(path.parents):
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    mode = path.stat().st_mode
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return None if mode & needed == needed else path


def learner_paths(data: Path | None = None) -> dict[str, Path]:
    r"""What every learner's server reads: the environment, its Python, the course, the data."""
    paths = {"the environment's programs": Path(sys.executable).parent,
             "its Python": Path(sys.executable).resolve(),
             "Python's standard library": Path(sysconfig.get_paths()["stdlib"]),
             "the installed packages": Path(sysconfig.get_paths()["purelib"]),
             "the course (capsedu and classroom/)": REPO / "classroom" / "learner_jupyter"}
    if data is not None:
        paths["the data (--data)"] = Path(data)
    return paths


def access_problems(paths: dict[str, Path]) -> list[str]:
    r"""One line per path of ``paths`` that learner accounts cannot reach, naming what stops them."""
    problems = []
    for what, path in paths.items():
        if not Path(path).exists():
            problems.append(f"{what}: {path} does not exist")
        elif (blocker := blocked_by(path)) is not None:
            mode = stat.filemode(blocker.stat().st_mode)
            problems.append(f"{what}: {path} - other accounts cannot enter {blocker} ({mode})")
    return problems


TAMPER_ADVICE = """Root runs the course's code and its environment: clone the course into a folder
only root can write (e.g. git clone ... /srv/capsedu, as root), build .venv there from a Python
only root can change (make hub PYTHON=/usr/bin/python3), and remove group and other write
permissions from what is named above (chmod -R go-w PATH)."""

ACCESS_ADVICE = """Learners' servers run as their own accounts and cannot reach the paths above.
Put the course where every account can read it (e.g. git clone ... /srv/capsedu) and build its
environment from a Python every account can run: `rm -rf .venv && make hub PYTHON=/usr/bin/python3
HUB_ARGS="..."` in that clone (make builds .venv only where there is none). Or open the folders
named (chmod o+rx), if that is acceptable on this machine."""


FOLDERS = {  # what each folder must be: (mode, why), its owner the hub's own account
    "state": (0o700, "the hub's database and cookie secret: private to the hub"),
    "exchange": (0o1777, "nbgrader's exchange: every learner writes into it, only a file's owner removes it"),
    "repos": (0o755, "the learner repository, served by git daemon as an unprivileged account"),
}


def prepare_folders(folders: dict[str, Path]) -> list[Path]:
    r"""Create each of ``folders`` (``FOLDERS``' keys) that is absent, with its mode; check each
    that exists and stop (SystemExit naming the folder and what to change) if its owner or mode
    is not what the hub needs - an existing folder is never changed (``--state /srv`` would
    otherwise lock every other account out of ``/srv``). Returns the folders created."""
    created, problems = [], []
    for name, path in folders.items():
        mode, why = FOLDERS[name]
        if not path.exists():
            path.mkdir(parents=True)
            path.chmod(mode)  # a folder this command just made: the umask may have narrowed it
            created.append(path)
            continue
        info = path.stat()
        if not path.is_dir() or info.st_uid != os.geteuid() or info.st_mode & 0o7777 != mode:
            problems.append(f"--{name} {path} is {stat.filemode(info.st_mode)}, owner uid {info.st_uid}; it "
                            f"must be a folder of uid {os.geteuid()} with mode {mode:o} ({why}). Choose a new "
                            f"folder (the command creates it), or change this one yourself: "
                            f"chown {os.geteuid()} {path} && chmod {mode:o} {path}")
    if problems:
        raise SystemExit("make hub changes no folder that already exists:\n" + "\n".join(problems))
    return created


def writable_by_others(path: Path) -> str | None:
    r"""Why another account could change what ``path`` holds, or None: a folder on the way to it or
    anything inside it owned by another account (root aside), or writable by group or others (a
    folder with the sticky bit, such as /tmp, protects what others do not own)."""
    path = Path(path).resolve()
    me = {0, os.geteuid()}
    for folder in [*reversed(path.parents), path]:
        problem = _risk(folder, me)
        if problem:
            return problem
    if path.is_dir():
        for folder, subfolders, files in os.walk(path):
            subfolders[:] = [s for s in subfolders if s not in ("__pycache__",)]
            for name in [*subfolders, *files]:
                problem = _risk(Path(folder) / name, me)
                if problem:
                    return problem
    return None


NEVER_RUN = {".lock"}  # uv's lock file in .venv: created 666 by design, read by no interpreter


def _risk(path: Path, me: set[int]) -> str | None:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or (stat.S_ISREG(info.st_mode) and path.name in NEVER_RUN):
        return None  # a link's own mode means nothing; what it points to is checked where it lies
    if info.st_uid not in me:
        return f"{path} belongs to uid {info.st_uid}"
    sticky_dir = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
        return f"{path} is writable by {'others' if info.st_mode & stat.S_IWOTH else 'its group'} ({stat.filemode(info.st_mode)})"
    return None


def root_executes() -> dict[str, Path]:
    r"""What the hub's own account runs: the clone's code, its environment, the Python."""
    return {"the course's clone": REPO / "coursetools", "the classroom configuration": REPO / "classroom",
            "the environment": Path(sys.prefix), "its Python": Path(sys.executable).resolve(),
            "Python's standard library": Path(sysconfig.get_paths()["stdlib"])}


def tamper_problems(paths: dict[str, Path]) -> list[str]:
    r"""One line per path of ``paths`` that another account could change, naming why."""
    return [f"{what}: {why}" for what, path in paths.items() if (why := writable_by_others(path))]


def git_daemon(repos: Path, port: int, user: str | None = None) -> list[str]:
    r"""``git daemon`` serving the repositories in ``repos`` read-only on 127.0.0.1:``port``; as
    ``user`` (and that account's group) when given, which needs root. The daemon then reads
    repositories another account (root) owns: ``safe.directory=*`` for this daemon alone, which
    serves only ``repos`` and only reads (upload-pack)."""
    command = ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
               f"--base-path={repos}", "--export-all"]
    if user is not None:
        group = grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
        command = ["git", "-c", "safe.directory=*", *command[1:], f"--user={user}", f"--group={group}"]
    return [*command, str(repos)]


def hub_environment(args: argparse.Namespace, proxy: str) -> dict[str, str]:
    r"""What ``classroom/jupyterhub_config.py`` reads from its environment."""
    env = dict(os.environ, CAPSEDU_HUB_STATE=str(args.state), CAPSEDU_EXCHANGE=str(args.exchange),
               CAPSEDU_HUB_PROXY=proxy, CAPSEDU_INSTRUCTORS=" ".join(args.instructors),
               CAPSEDU_LEARNERS=" ".join(args.learners))
    if args.data is not None:
        env["CAPSEDU_DATA"] = str(args.data)
    return env


def parser() -> argparse.ArgumentParser:
    r"""The command line of ``make hub`` (its ``HUB_ARGS``)."""
    p = argparse.ArgumentParser(prog="python -m coursetools.hub_server", description=__doc__.split("\n")[0].replace("``", ""))
    p.add_argument("--instructors", nargs="*", default=[], metavar="USER", help="the hub's admins (graders)")
    p.add_argument("--learners", nargs="*", default=[], metavar="USER", help="accounts allowed to log in")
    p.add_argument("--withhold", nargs="*", default=[], metavar="NN_name",
                   help="lessons given as graded assignments (they travel through nbgrader)")
    p.add_argument("--state", type=Path, default=Path("/srv/capsedu-hub"),
                   help="the hub's database, secrets and learner repository (default %(default)s)")
    p.add_argument("--exchange", type=Path, default=Path("/srv/nbgrader/exchange"),
                   help="nbgrader's exchange folder (default %(default)s)")
    p.add_argument("--repos", type=Path, default=Path("/srv/capsedu-repos"),
                   help="the folder git daemon serves the learner repository from (default %(default)s)")
    p.add_argument("--git-user", default="nobody",
                   help="the account git daemon runs as when make hub runs as root (default %(default)s)")
    p.add_argument("--data", type=Path, help="a folder with the MNIST files every learner can read")
    p.add_argument("--git-port", type=int, default=9418, help="git daemon's port on 127.0.0.1 (default %(default)s)")
    p.add_argument("--url", default="http://127.0.0.1:8000",
                   help="the hub's address as learners reach it, for the printed link (default %(default)s)")
    p.add_argument("--config", type=Path, default=CLASSROOM_CONFIG, help="JupyterHub's configuration file")
    p.add_argument("--proxy-cache", type=Path, default=PROXY_CACHE, help="where npm installs the proxy")
    p.add_argument("--no-access-check", action="store_true",
                   help="skip the learner-access check (every server runs as the hub's own account); "
                        "the check that no other account can change what root runs still runs")
    return p


def prepare(args: argparse.Namespace) -> tuple[str, str]:
    r"""Steps 1-5 but starting the hub: the proxy's command and the learners' nbgitpuller link."""
    tampering = tamper_problems(root_executes()) if os.geteuid() == 0 else []
    if tampering:
        raise SystemExit("\n".join(["make hub: as root it would run code another account can change:",
                                    *tampering, "", TAMPER_ADVICE]))
    problems = [] if args.no_access_check else access_problems(learner_paths(args.data))
    if problems:
        raise SystemExit("\n".join(["make hub: learner accounts cannot run the course here:", *problems,
                                    "", ACCESS_ADVICE]))
    proxy = proxy_command(args.proxy_cache)
    prepare_folders({"state": args.state, "exchange": args.exchange, "repos": args.repos})
    commit = publish(args.repos / LEARNER_REPO, args.withhold)
    settle_lab_settings()
    link = pull_link(args.url, f"git://127.0.0.1:{args.git_port}/{LEARNER_REPO}")
    print(f"learner repository {args.repos / LEARNER_REPO} at {commit[:10]}, served on "
          f"git://127.0.0.1:{args.git_port}/{LEARNER_REPO}\nlearners open:\n{link}", flush=True)
    return proxy, link


def _stop(signum, frame):
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    r"""Prepare, then run git daemon and JupyterHub until Ctrl+C or SIGTERM; the hub's exit code."""
    args = parser().parse_args(argv)
    proxy, _ = prepare(args)
    signal.signal(signal.SIGTERM, _stop)
    hub = [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(args.config)]
    print("starting:", shlex.join(hub), flush=True)
    daemon = subprocess.Popen(git_daemon(args.repos, args.git_port, args.git_user if os.geteuid() == 0 else None))
    process = subprocess.Popen(hub, cwd=args.state, env=hub_environment(args, proxy))
    try:
        return process.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        for child in (process, daemon):
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()


if __name__ == "__main__":
    sys.exit(main())
