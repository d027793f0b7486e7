"""JupyterHub for a capsedu class on one machine - what ``make hub`` runs and ``tests/test_hub.py`` tests.

    sudo make hub HUB_ARGS="--instructors alan --learners 'ada grace'"   # in the course's folder

``make hub`` (``coursetools/hub_server.py``) prepares the state folder, the exchange, the proxy and
the learner repository, checks that learner accounts can reach the environment, and starts
JupyterHub with this file. Every learner's server is JupyterLab from the course's own environment
(the one that runs this file), with nbgrader's *Assignments* tab for learners
(``classroom/learner_jupyter``) and its instructor tools for the hub's admins. Learners get their
lessons from an nbgitpuller link and graded assignments through nbgrader's exchange folder.

What it reads from its environment (``make hub`` sets each from its arguments):
``CAPSEDU_HUB_STATE`` (the hub's database and secrets), ``CAPSEDU_HUB_PROXY``
(configurable-http-proxy), ``CAPSEDU_EXCHANGE`` (nbgrader's exchange), ``CAPSEDU_INSTRUCTORS`` and
``CAPSEDU_LEARNERS`` (user names, space-separated), ``CAPSEDU_DATA`` (a folder with the MNIST files
every learner can read). Learners log in with their system accounts (PAM, JupyterHub's default)
and each server runs as that user (LocalProcessSpawner); for a hub on Kubernetes see
``classroom/z2jh``. The test loads this file and changes the ports, the authenticator and the
spawner (one system user with a fixed password: it cannot create system users), and the servers'
arguments (``--allow-root``; JupyterLab's objects exposed to the browser, which the test reads) -
see ``TEST_CONFIG`` in ``tests/test_hub.py``.
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

CLASSROOM = Path(__file__).resolve().parent
ENV_BIN = Path(sys.executable).parent  # the course's environment runs every learner's server
STATE = Path(os.environ.get("CAPSEDU_HUB_STATE", "/srv/capsedu-hub"))
EXCHANGE = os.environ.get("CAPSEDU_EXCHANGE", "/srv/nbgrader/exchange")

c.JupyterHub.bind_url = "http://127.0.0.1:8000"  # put your HTTPS reverse proxy in front of it
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
c.ConfigurableHTTPProxy.command = [os.environ.get("CAPSEDU_HUB_PROXY", "configurable-http-proxy")]

c.Authenticator.admin_users = set(os.environ.get("CAPSEDU_INSTRUCTORS", "").split())
c.Authenticator.allowed_users = set(os.environ.get("CAPSEDU_LEARNERS", "").split())


def learner_config(spawner) -> str:
    """Learners get the Assignments tab and submit as their hub name; instructors grade."""
    return "" if spawner.user.admin else str(CLASSROOM / "learner_jupyter")


c.Spawner.cmd = [str(ENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    "JUPYTER_CONFIG_PATH": learner_config,
    "CAPSEDU_EXCHANGE": EXCHANGE,
    "PATH": os.pathsep.join([str(ENV_BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
    **({"CAPSEDU_DATA": os.environ["CAPSEDU_DATA"]} if os.environ.get("CAPSEDU_DATA") else {}),
}
# "What each learner costs" (book/instructors.md): every lesson's kernel peaks under 2 GiB; half
# a CPU lets a class work, a whole one halves the wait at lesson 06's training. Spawners that
# isolate learners (systemdspawner, DockerSpawner, KubeSpawner) enforce these; LocalProcessSpawner
# cannot, so watch the machine: about 2 GiB and half a core per active learner.
c.Spawner.mem_guarantee = "1G"
c.Spawner.mem_limit = "2G"
c.Spawner.cpu_guarantee = 0.5
c.Spawner.cpu_limit = 1.0
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
