"""The instructor's grading server: Formgrader, on its own port, and little else (issue 27).

Run it from the course directory (the folder holding ``nbgrader_config.py``)::

    jupyter server --config=course_tools/grading/jupyter_server_config.py

then open http://127.0.0.1:8899/formgrader (the token is printed); ``jupyter lab --config=...``
works too (Formgrader's tab, and its links to the notebooks, which open read-only). Edit notebooks and run code
in your usual JupyterLab, on another port: a different origin, so even a script that slipped
through Formgrader's defences (course_tools/grading/render.py) could not reach that server, and
this one refuses terminals, kernels, sessions and writes through the contents API
(:class:`course_tools.grading.render.GradingAuthorizer`). Nothing in nbgrader's grading needs
them: ``autograde`` and ``generate_feedback`` from Formgrader's buttons run in the server's process.
``GRADING_PORT`` changes the port.
"""
import os
import sys

_course = os.getcwd()
if _course not in sys.path:  # course_tools is imported from the course directory
    sys.path.insert(0, _course)

c = get_config()  # noqa: F821  (provided by traitlets when jupyter loads this file)

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port = int(os.environ.get("GRADING_PORT", "8899"))
c.ServerApp.port_retries = 0          # its own origin: never drift to a port another server used
c.ServerApp.open_browser = False
c.ServerApp.root_dir = _course
c.ServerApp.terminals_enabled = False
c.ServerApp.authorizer_class = "course_tools.grading.render.GradingAuthorizer"
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "course_tools.grading.render": True,      # Formgrader's submission pages: script nonce policy
    # the students' side of nbgrader has nothing to do on the grading server
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.validate_assignment": False,
    "jupyter_lsp": False,                     # starts language-server processes: not needed to grade
}
# GradingAuthorizer.refuse_contents_writes = False lets this server save files (editing the source
# in `jupyter lab --config=...`); kernels, sessions and terminals stay refused.
# MathJax from this server where Debian's libjs-mathjax is installed (an offline grading machine),
# else nbconvert's default (cdnjs). Either is loaded by a nonced script (course_tools/grading/render.py).
_mathjax = os.environ.get("LLM_COURSE_MATHJAX", "/usr/share/javascript/mathjax")
if os.path.isfile(os.path.join(_mathjax, "MathJax.js")):
    c.ServerApp.extra_static_paths = [_mathjax]
    c.ServerApp.tornado_settings = {"llm_course_mathjax_url": "/static/MathJax.js?config=TeX-AMS_CHTML-full,Safe"}
# No cross-origin access of any kind.
c.ServerApp.allow_origin = ""
c.ServerApp.allow_remote_access = False
c.ServerApp.disable_check_xsrf = False
