"""course_tools: the instructor's and CI's side of the course, never imported by a notebook.

``release`` (student notebooks from ``solutions/``), ``authoring`` (chapter scripts in
``chapters/`` ↔ solution notebooks), ``grading`` (everything ``nbgrader_config.py`` adds to
autograding, and the round trip the tests run), ``kernels`` (nbval kernels over IPC) and ``cli``
(the ``llm-course`` command). It may import ``course_utils``; ``course_utils`` never imports it
(``tests/test_layout.py`` checks both).
"""
