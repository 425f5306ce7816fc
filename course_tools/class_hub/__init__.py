"""The class on a JupyterHub: one machine, one Unix account per person (README "Run the class on a JupyterHub").

``llm-course class-hub up`` (``make hub``) starts JupyterHub from this environment with:

* **PAM logins** (:class:`jupyterhub.auth.PAMAuthenticator`): each student and instructor is a real
  Unix account of the machine, in the group ``llm-course-students`` or ``llm-course-instructors``.
  That is what the course's exchange is built on (the submission service learns the account from
  the kernel, ``SO_PEERCRED``; collect checks owners), and what a university's shared machine
  already has (its accounts come from LDAP/SSSD through PAM). Nobody is a hub admin.
* **One server per account, started as that account** (:class:`jupyterhub.spawner.LocalProcessSpawner`):
  JupyterLab with nbgrader's Assignments tab, this environment first on ``PATH``, the course's
  model cache readable, offline switches as the class sets them. Students' servers have no
  Formgrader, course list or create-assignment extension (:mod:`.config`).
* **Formgrader in the instructor's own server**, started in the course root with the course's
  ``nbgrader_config.py`` (sandboxed autograde, owner-checked collect: the same code the command
  line runs). So it needs **no hub scope at all**: every account has JupyterHub's default
  ``user`` role (its own server and tokens), and a student reaching the instructor's server is
  refused by it (403), as for any other account's server. This sidesteps the service scopes that
  nbgrader's own hub recipes need (jupyter/nbgrader#1594, #1900, #1831).
* **The submission service** (``llm-course exchange serve``) as a hub-managed service run as the
  instructor's account, with no API scope; **jupyterhub-idle-culler** as a service with the four
  scopes it needs (``list:users``, ``read:users:activity``, ``read:servers``, ``delete:servers``).
* **The proxy** is ``configurable-http-proxy`` from npm, pinned in ``hub/package-lock.json``
  (``npm ci --prefix hub``).
"""
