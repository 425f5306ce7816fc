"""The course's exchange: submissions handed to the instructor's process, not left in a shared folder.

nbgrader's default exchange is a folder every student can write into (``inbound`` is ``-wx`` for
everyone, each submission folder ``0777``, owned by the student who keeps her files). Whatever the
collector then decides from that folder (its owner, its change times) can be undone by the student
who still controls the inodes: a file swapped between collect's scan and its copy, a write through
a shared memory mapping made before the deadline (it does not move the change time on tmpfs), a
stranger's file added to her folder. This package replaces the student-writable part:

* :mod:`.server` — ``llm-course exchange serve``, run by the instructor: a Unix-domain socket in the
  instructor's course folder of the exchange. The kernel tells it who connects (``SO_PEERCRED``);
  the bytes arrive over the socket and are written by the instructor's process into ``inbound``
  (``0700``, the instructor's), with the service's own receipt time. After ``submit`` returns, the
  student owns nothing of her submission.
* :mod:`.client` — the nbgrader exchange plugins both sides load (``nbgrader_config.py`` of the
  course for the instructor; ``<environment>/etc/jupyter/nbgrader_config.py`` for the students,
  written by ``make install``): ``submit`` talks to the service, ``fetch_assignment``,
  ``fetch_feedback`` and ``list`` read an exchange nobody else can write; ``release_assignment``
  and ``release_feedback`` never open it to others.
* :mod:`.layout` — the checks every one of these runs first: the exchange root, the course folder,
  ``outbound``, ``inbound`` and ``feedback`` belong to the instructor (or root) and no other
  account can write them (no ``chmod 777`` root: another account could rename the course folder
  and put hers in its place).
"""
