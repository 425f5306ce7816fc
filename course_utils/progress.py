"""Progress bars that stay readable in a saved notebook (chapters 08-13).

``tqdm.auto`` draws an ipywidgets bar in any Jupyter kernel. A notebook executed headless
(``llm-course build``, ``nbgrader autograde``, ``jupyter nbconvert --execute``, nbval) saves only
the widget's *view*, without its state, so the committed notebook shows a bar frozen at
``0%| | 0/1201`` whatever the loop did. :func:`tqdm` here draws the widget only where a frontend
renders it live (a kernel started by a Jupyter server, which sets ``JPY_SESSION_NAME``, or
Colab) and otherwise a plain text bar on ``sys.stdout``, updated at most every
``HEADLESS_INTERVAL`` seconds, whose last state (100 % once the loop ends) is what the saved
output shows.

``LLM_COURSE_PROGRESS=text`` or ``=widget`` overrides the choice.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Iterable

HEADLESS_INTERVAL = 30.0  # seconds between two redraws of a text bar nobody watches


def interactive_frontend() -> bool:
    """True in a kernel whose outputs a frontend renders live (JupyterLab / Notebook, Colab)."""
    choice = os.environ.get("LLM_COURSE_PROGRESS", "").strip().lower()
    if choice in {"text", "widget"}:
        return choice == "widget"
    if "google.colab" in sys.modules:
        return True
    return bool(os.environ.get("JPY_SESSION_NAME")) and "ipykernel" in sys.modules


def tqdm(iterable: Iterable[Any] | None = None, *args: Any, **kwargs: Any) -> Any:
    """A ``tqdm`` bar: the notebook widget in a live frontend, a text bar on stdout otherwise.

    Same arguments as ``tqdm.tqdm``. Headless, the text bar redraws at most every
    ``HEADLESS_INTERVAL`` seconds (unless ``mininterval`` is given) so that a saved output holds a
    few lines, not thousands, and ends at 100 % (or is erased, with ``leave=False``).
    """
    if interactive_frontend():
        from tqdm.auto import tqdm as auto_tqdm

        return auto_tqdm(iterable, *args, **kwargs)
    from tqdm.std import tqdm as text_tqdm

    kwargs.setdefault("file", sys.stdout)
    kwargs.setdefault("mininterval", HEADLESS_INTERVAL)
    kwargs.setdefault("maxinterval", max(HEADLESS_INTERVAL, kwargs["mininterval"]))
    kwargs.setdefault("ncols", 100)
    return text_tqdm(iterable, *args, **kwargs)
