"""nbgrader for a learner on the class's JupyterHub: fetch, submit, fetch feedback (classroom/README.md)."""
import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.CourseDirectory.course_id = "capsedu"
# the exchange folder that every learner's server and the instructor share (readable and
# writable by all of them; nbgrader's default is /srv/nbgrader/exchange)
c.Exchange.root = os.environ.get("CAPSEDU_EXCHANGE", "/srv/nbgrader/exchange")
# who submits: the hub's user name. Where every learner's server runs as one system user (a
# container's `jovyan`, or the test's SimpleLocalProcessSpawner), nbgrader cannot tell them apart
# from the system user name.
if os.environ.get("JUPYTERHUB_USER"):
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
