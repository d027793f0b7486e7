"""nbgrader for a learner on the class's JupyterHub: fetch, submit, fetch feedback (classroom/README.md)."""
import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.CourseDirectory.course_id = "capsedu"
# the exchange folder that every learner's server and the instructor share (readable and
# writable by all of them; nbgrader's default is /srv/nbgrader/exchange)
c.Exchange.root = os.environ.get("CAPSEDU_EXCHANGE", "/srv/nbgrader/exchange")
# who submits: the hub's user name. nbgrader takes the system user's name, except for a
# container's `jovyan`, where it already reads JUPYTERHUB_USER; on a machine where every learner's
# server runs as one other system user (the test's SimpleLocalProcessSpawner) it could not tell
# them apart without this line.
if os.environ.get("JUPYTERHUB_USER"):
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
