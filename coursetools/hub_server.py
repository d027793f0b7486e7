r"""The class hub on one machine, in one command: ``make hub`` (``python -m coursetools.hub_server``).

    sudo make hub HUB_ARGS="--instructors alan --learners 'ada grace' --withhold 01_squash"

Run as root in the course's folder (PAM logs learners in with their system accounts and every
learner's server runs as that account). It prepares what ``classroom/jupyterhub_config.py`` needs
around it and runs the hub until Ctrl+C:

1. the hub's state folder (its database and cookie secret; mode 700) and nbgrader's exchange
   (mode 1777: every learner writes into it);
2. configurable-http-proxy: the one on ``PATH``, else installed once from npm into a cache;
3. a check that learner accounts can reach the course's environment and folders (a Python
   under root's home, mode 700, is the usual trap): it names each path they cannot enter;
4. the learner repository (``coursetools.hub.publish``) in ``STATE/repos/capsedu-learner``,
   served read-only by ``git daemon`` on 127.0.0.1 - nbgitpuller, running as the learner,
   clones it over ``git://``, so no account has to own it (git refuses a repository another
   account owns: "detected dubious ownership");
5. the course's JupyterLab defaults in the environment (``coursetools.hub settle-lab``), then
   JupyterHub with ``classroom/jupyterhub_config.py``; the nbgitpuller link is printed.

``tests/test_hub.py`` runs this command with the arguments ``classroom/README.md`` gives, adding
its own folders, ports (``--config``) and ``--no-access-check`` (its servers all run as one
account: it cannot create system users).
"""

from __future__ import annotations

import argparse
import os
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
PROXY_PACKAGE = "configurable-http-proxy@4"
PROXY_CACHE = Path.home() / ".cache" / "capsedu" / "hub"


def proxy_command(cache: Path = PROXY_CACHE) -> str:
    r"""configurable-http-proxy: on ``PATH``, else installed once from npm into ``cache``."""
    found = shutil.which("configurable-http-proxy")
    local = Path(cache) / "node_modules" / ".bin" / "configurable-http-proxy"
    if found or local.exists():
        return found or str(local)
    if shutil.which("npm") is None:
        raise RuntimeError("npm is missing: it installs configurable-http-proxy, JupyterHub's proxy "
                           "(Debian: apt-get install -y npm)")
    Path(cache).mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", PROXY_PACKAGE],
                            capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0 or not local.exists():
        raise RuntimeError(f"npm could not install {PROXY_PACKAGE} into {cache}:\n{result.stderr[-1000:]}")
    return str(local)


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


ACCESS_ADVICE = """Learners' servers run as their own accounts and cannot reach the paths above.
Put the course where every account can read it (e.g. git clone ... /srv/capsedu) and build its
environment from a Python every account can run: `rm -rf .venv && make hub PYTHON=/usr/bin/python3
HUB_ARGS="..."` in that clone (make builds .venv only where there is none). Or open the folders
named (chmod o+rx), if that is acceptable on this machine."""


def prepare_folders(state: Path, exchange: Path) -> None:
    r"""The hub's private state folder and nbgrader's shared exchange, created with their modes."""
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)  # the cookie secret and the database
    exchange.mkdir(parents=True, exist_ok=True)
    exchange.chmod(0o1777)  # every learner writes into it, only its owner removes a file


def git_daemon(repos: Path, port: int) -> list[str]:
    r"""``git daemon`` serving the repositories in ``repos`` read-only on 127.0.0.1:``port``."""
    return ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
            f"--base-path={repos}", "--export-all", str(repos)]


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
    p.add_argument("--data", type=Path, help="a folder with the MNIST files every learner can read")
    p.add_argument("--git-port", type=int, default=9418, help="git daemon's port on 127.0.0.1 (default %(default)s)")
    p.add_argument("--url", default="http://127.0.0.1:8000",
                   help="the hub's address as learners reach it, for the printed link (default %(default)s)")
    p.add_argument("--config", type=Path, default=CLASSROOM_CONFIG, help="JupyterHub's configuration file")
    p.add_argument("--proxy-cache", type=Path, default=PROXY_CACHE, help="where npm installs the proxy")
    p.add_argument("--no-access-check", action="store_true",
                   help="skip the learner-access check (every server runs as the hub's own account)")
    return p


def prepare(args: argparse.Namespace) -> tuple[str, str]:
    r"""Steps 1-5 but starting the hub: the proxy's command and the learners' nbgitpuller link."""
    problems = [] if args.no_access_check else access_problems(learner_paths(args.data))
    if problems:
        raise SystemExit("\n".join(["make hub: learner accounts cannot run the course here:", *problems,
                                    "", ACCESS_ADVICE]))
    proxy = proxy_command(args.proxy_cache)
    prepare_folders(args.state, args.exchange)
    commit = publish(args.state / "repos" / LEARNER_REPO, args.withhold)
    settle_lab_settings()
    link = pull_link(args.url, f"git://127.0.0.1:{args.git_port}/{LEARNER_REPO}")
    print(f"learner repository {args.state / 'repos' / LEARNER_REPO} at {commit[:10]}, served on "
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
    daemon = subprocess.Popen(git_daemon(args.state / "repos", args.git_port))
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
