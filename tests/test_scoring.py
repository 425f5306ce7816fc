"""course_utils.scoring: the batched, cached label scorer equals the one-pass-per-label definition."""
import pytest
import torch
import transformers  # noqa: F401  (imported while HF_HUB_OFFLINE=1: huggingface_hub reads it at import)
from transformers import LlamaConfig, LlamaForCausalLM

from course_utils import models, scoring
from course_utils.generation import generate_text

LABELS = ("POSITIVO", "NEGATIVO")
# a shared beginning (cached once), own ends of different lengths (right padding), a chunk boundary
PROMPTS = ['Classifique.\n\nTexto: "bom"\nSentimento:', 'Classifique.\n\nTexto: "ruim demais, nunca mais"\nSentimento:',
           'Classifique.\n\nTexto: "ok"\nSentimento:']


@pytest.fixture(scope="module")
def tiny():
    """A small random Llama with the stand-in's tokenizer and chat template: fast, and no near-ties."""
    _, tok = models.load_model(models.SMOLLM2, verbose=False)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # spread the logits so that greedy answers are clear-cut
        model.model.embed_tokens.weight.mul_(50)
    return model, tok


@pytest.mark.parametrize("fmt", ["chat", "raw"])
def test_batched_scores_equal_one_pass_per_label(tiny, fmt):
    model, tok = tiny
    fast = scoring.run_prompts(model, tok, PROMPTS, LABELS, fmt, gen_tokens=3, chunk=2)
    slow = torch.tensor([scoring.label_scores(model, tok, p, LABELS, fmt) for p in PROMPTS], dtype=torch.float64)
    assert fast["scores"].shape == (3, 2) and fast["scores"].dtype == torch.float64
    torch.testing.assert_close(fast["scores"], slow, atol=1e-3, rtol=0)
    # "first": the next-token distribution at the label position; its entry at the label's first token
    for i, p in enumerate(PROMPTS):
        x = scoring.prompt_token_ids(tok, p, fmt)
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([x])).logits[0, -1].float().log_softmax(-1)
        torch.testing.assert_close(fast["first"][i], ref, atol=1e-3, rtol=0)


@pytest.mark.parametrize("fmt", ["chat", "raw"])
def test_cached_greedy_equals_generate(tiny, fmt):
    model, tok = tiny
    fast = scoring.run_prompts(model, tok, PROMPTS, LABELS, fmt, gen_tokens=4, chunk=2)
    assert fast["greedy"] == [generate_text(model, tok, p, max_new_tokens=4, chat=(fmt == "chat")) for p in PROMPTS]


def test_samples_are_seeded_and_shaped(tiny):
    model, tok = tiny
    kw = dict(gen_tokens=3, n_samples=4, temperature=100.0, chunk=2)   # hot: the tiny model's samples must vary
    a, b, c = (scoring.run_prompts(model, tok, PROMPTS, LABELS, "raw", seed=s, **kw)["samples"] for s in (7, 7, 8))
    assert [len(s) for s in a] == [4, 4, 4]
    assert a == b and a != c


def test_label_token_ids_and_errors(tiny):
    model, tok = tiny
    assert scoring.formats(model) == ("chat", "raw")
    raw, chat = scoring.label_token_ids(tok, "NEGATIVO", "raw"), scoring.label_token_ids(tok, "NEGATIVO", "chat")
    assert tok.decode(raw) == " NEGATIVO" and tok.decode(chat) == "NEGATIVO"
    with pytest.raises(ValueError, match="fmt"):
        scoring.run_prompts(model, tok, PROMPTS, LABELS, "json")
    with pytest.raises(ValueError, match="at least one"):
        scoring.run_prompts(model, tok, [], LABELS, "raw")


def test_no_labels_is_generation_only(tiny):
    model, tok = tiny
    out = scoring.run_prompts(model, tok, PROMPTS, (), "raw", gen_tokens=3, chunk=2)
    assert out["scores"].shape == (3, 0)
    assert out["greedy"] == scoring.run_prompts(model, tok, PROMPTS, LABELS, "raw", gen_tokens=3)["greedy"]
