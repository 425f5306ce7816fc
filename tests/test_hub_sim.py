"""The path most students take: real model names from the hub (course_tools/hub_sim.py).

A simulated hub (``llm-course hub-sim``) holds the course's four names at their real
configurations (random weights; the real GPT-2 and BERT tokenizers; SmolLM2's converted weights).
With ``HF_HOME`` pointing at it and ``HF_HUB_OFFLINE=1``, ``load_model`` takes the real-model
branch, exactly as on Colab, and must say SIMULATED in its banner. Then chapters whose
model-dependent cells differ on that branch are executed end to end, hidden tests included.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools import hub_sim

CHAPTERS_ONLINE = ["01_tokenization", "02_bert_embeddings_attention", "04_lm_head_logit_lens", "09_prompting_flan_t5"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    return hub_sim.build(tmp_path_factory.mktemp("hub-sim"), verbose=False)


def _env(hub: Path) -> dict[str, str]:
    env = dict(os.environ, HF_HOME=str(hub), HF_HUB_OFFLINE="1", LLM_COURSE_CI="1")
    env.pop("LLM_COURSE_OFFLINE", None)
    return env


PROBE = r'''
import json
from course_utils.models import MODEL_NAMES, describe, load_model, last_loaded
r = {}
for name in MODEL_NAMES:
    model, tok = load_model(name, need="text", verbose=False)
    info = last_loaded()
    r[name] = {"banner": info.banner(), "simulated": info.simulated, "describe": describe(name),
               "params": sum(p.numel() for p in model.parameters()), "class": type(model).__name__,
               "ids": tok("Hello world, this is a test.")["input_ids"]}
    if name == "google/flan-t5-small":
        from course_utils.generation import generate_text
        r[name]["generated"] = isinstance(generate_text(model, tok, "Translate to German: hello", max_new_tokens=4), str)
        c = model.config
        r[name]["shape"] = [c.d_model, c.num_layers, c.num_decoder_layers, c.num_heads, c.vocab_size, c.feed_forward_proj]
print(json.dumps(r))
'''


def test_each_name_resolves_to_a_simulated_model_of_the_real_configuration(hub):
    out = subprocess.run([sys.executable, "-c", PROBE], env=_env(hub), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    for name, got in r.items():
        assert got["simulated"] and "SIMULATED hub model" in got["banner"], got["banner"]
        assert "SIMULATED" in got["describe"]
    assert r["bert-base-uncased"]["params"] == 109_482_240           # BertModel of bert-base-uncased
    assert r["bert-base-uncased"]["ids"] == [101, 7592, 2088, 1010, 2023, 2003, 1037, 3231, 1012, 102]
    assert r["gpt2"]["params"] == 124_439_808 and r["gpt2"]["class"] == "GPT2LMHeadModel"
    assert r["gpt2"]["ids"] == [15496, 995, 11, 428, 318, 257, 1332, 13], "not the real GPT-2 tokenizer"
    t5 = r["google/flan-t5-small"]
    assert t5["class"] == "T5ForConditionalGeneration" and t5["generated"]
    assert t5["shape"] == [512, 8, 8, 6, 32128, "gated-gelu"]
    assert t5["ids"][-1] == 1, "a T5 tokenizer ends every sequence with </s> (id 1)"
    assert r["HuggingFaceTB/SmolLM2-135M-Instruct"]["class"] == "LlamaForCausalLM"


@pytest.mark.parametrize("ch", CHAPTERS_ONLINE)
def test_chapter_runs_on_the_real_model_branch(hub, ch, tmp_path):
    """Every cell of the solution, hidden tests and library references included, on the real-size models."""
    src = (Path("solutions") / ch / f"{ch}.ipynb").resolve()
    out = tmp_path / f"{ch}.ipynb"
    res = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                          "--ExecutePreprocessor.timeout=600", "--allow-errors", "--output", str(out), str(src)],
                         env=_env(hub), capture_output=True, text=True, timeout=1200, cwd=src.parent)
    assert res.returncode == 0, res.stderr[-3000:]
    nb = nbformat.read(out, as_version=4)
    errors = [(c.metadata.get("nbgrader", {}).get("grade_id", i), o.get("ename"), str(o.get("evalue"))[:300])
              for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{ch} on the simulated hub: {errors}"
    banners = [o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if o.get("output_type") == "stream" and "[model]" in o.get("text", "")]
    assert banners and all("SIMULATED hub model" in b for b in banners), banners
