"""course_utils.training: autograding flag, parameter counts, deterministic evaluation, loss curves."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from course_utils import training  # noqa: E402


def test_autograding_follows_nbgrader_variable(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert training.autograding() is False
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert training.autograding() is True


def test_count_parameters_counts_tied_weights_once():
    emb, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.ModuleDict({"emb": emb, "head": head, "ln": nn.LayerNorm(4)})
    assert training.count_parameters(model) == 40 + 8
    model["ln"].weight.requires_grad_(False)
    assert training.count_parameters(model, trainable_only=True) == 40 + 4


def test_evaluate_lm_is_mean_cross_entropy_in_eval_mode_and_restores_mode():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(5, 3), nn.Dropout(0.5), nn.Linear(3, 5))
    x = torch.randint(0, 5, (7, 4))
    y = torch.randint(0, 5, (7, 4))
    model.train()
    got = training.evaluate_lm(model, x, y, batch_size=3)      # chunks of 3, 3, 1 windows
    assert model.training
    model.eval()
    with torch.no_grad():
        ref = F.cross_entropy(model(x).reshape(-1, 5), y.reshape(-1)).item()
    assert math.isclose(got, ref, rel_tol=1e-6)
    assert training.evaluate_lm(model, x, y, batch_size=3) == got   # deterministic
    # one chunk or three: the same mean, up to float32 logits computed at another batch shape
    # (a different BLAS path: 3e-10 relative on this machine)
    assert math.isclose(training.evaluate_lm(model, x, y), got, rel_tol=1e-7)
    with pytest.raises(ValueError):
        training.evaluate_lm(model, x, y[:, :3])


def test_plot_loss_curves_labels_and_baselines():
    ax = training.plot_loss_curves({"train": ([0, 1, 2], [3.0, 2.0, 1.5])}, baselines={"bigram": 2.5}, title="T")
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() == "T"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["train", "bigram = 2.500"]
    plt.close("all")
