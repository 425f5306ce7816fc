"""The loader: real-vs-stand-in banner, clear errors, never a silent switch, never a hang."""
import time

import pytest
import torch

from course_utils import models


def test_unknown_model_names_the_choices():
    with pytest.raises(models.UnknownModel, match="bert-base-uncased"):
        models.load_model("gpt-5")


def test_online_without_hub_fails_fast_naming_the_variable(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("LLM_COURSE_OFFLINE", raising=False)
    monkeypatch.setattr(models, "_from_hub", _no_cache)
    monkeypatch.setattr(models, "hub_reachable", lambda timeout=4.0: False)
    t0 = time.perf_counter()
    with pytest.raises(models.HubUnreachable, match="LLM_COURSE_OFFLINE=1"):
        models.load_model("bert-base-uncased")
    assert time.perf_counter() - t0 < 10


def test_hub_probe_is_bounded():
    t0 = time.perf_counter()
    models.hub_reachable(timeout=1.0)  # unreachable here: must give up on its own
    assert time.perf_counter() - t0 < 3


def _no_cache(name, local_only):
    raise OSError("not cached")


def test_bert_stand_in_banner_and_book_ids(capsys):
    model, tok = models.load_model("bert-base-uncased")
    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and "STAND-IN" in out.out and "all-MiniLM-L6-v2" in out.out
    assert out.err == "", f"loader wrote to stderr: {out.err!r}"
    assert models.last_loaded().stand_in
    ids = tok("A cute teddy bear is reading a book.")["input_ids"]
    assert ids == [101, 1037, 10140, 11389, 4562, 2003, 3752, 1037, 2338, 1012, 102]
    assert model.config._attn_implementation == "eager"
    with torch.no_grad():
        o = model(**tok("a cute teddy bear", return_tensors="pt"), output_attentions=True)
    assert len(o.attentions) == model.config.num_hidden_layers
    torch.testing.assert_close(o.attentions[0].sum(-1), torch.ones(1, 12, 6))


def test_gpt2_size_stand_in_has_gpt2_small_shape(capsys):
    model, tok = models.load_model("gpt2")
    assert "STAND-IN" in capsys.readouterr().out
    n = sum(p.numel() for p in model.parameters())
    assert n == 124_439_808  # gpt2-small, lm_head tied to wte
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()


def test_gpt2_size_stand_in_is_deterministic():
    a, _ = models.load_model("gpt2", verbose=False)
    b, _ = models.load_model("gpt2", verbose=False)
    assert torch.equal(a.transformer.h[0].attn.c_attn.weight, b.transformer.h[0].attn.c_attn.weight)


def test_shakespeare_gpt2_generates_text(capsys):
    model, tok = models.load_model("gpt2", need="text")
    assert "Shakespeare" in capsys.readouterr().out
    ids = tok("To be, or not to be", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tok.eos_token_id)
    assert out.shape[1] == ids.shape[1] + 8
    assert isinstance(tok.decode(out[0]), str)
    from course_utils.shakespeare_gpt2 import training_log

    log = training_log()
    assert log["val_loss"] < 6.0, "the stand-in did not learn: validation loss should be far below log(2048)=7.6"


def test_t5_stand_in_runs_end_to_end(capsys):
    model, tok = models.load_model("google/flan-t5-small")
    assert "STAND-IN" in capsys.readouterr().out
    enc = tok(["Translate to French: hello"], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=5, do_sample=False)
    assert out.shape[0] == 1 and isinstance(tok.decode(out[0], skip_special_tokens=True), str)


def test_need_is_validated():
    with pytest.raises(ValueError, match="need"):
        models.load_model("gpt2", need="quality")
