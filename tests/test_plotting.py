"""course_utils.plotting: labelled figures (what is drawn, not how it looks)."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import plotting  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_heatmap_labels_annotations_and_masked_cells():
    m = torch.tensor([[0.25, -math.inf], [0.5, 0.75]])
    ax = plotting.heatmap(m, row_labels=["q0", "q1"], col_labels=["k0", "k1"], title="A")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["q0", "q1"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["k0", "k1"]
    assert sorted(t.get_text() for t in ax.texts) == ["-inf", "0.25", "0.50", "0.75"]
    assert ax.get_title() == "A"
    shown = ax.collections[0].get_array().reshape(2, 2)          # seaborn draws a QuadMesh
    assert shown.mask[0, 1] and not shown.mask[1, 1], "-inf must be drawn blank (masked)"
    assert shown[1, 1] == 0.75 and shown[0, 0] == 0.25, "the finite cells keep their values"


def test_heatmap_large_matrix_is_not_annotated_and_3d_is_refused():
    ax = plotting.heatmap(np.zeros((13, 13)), colorbar=False)
    assert not ax.texts
    with pytest.raises(ValueError, match="2-D"):
        plotting.heatmap(np.zeros((2, 2, 2)))


def test_line_bar_and_scatter_carry_their_labels():
    ax = plotting.line_plot([1, 2, 3], {"raw": [1, 2, 3], "scaled": [1, 1, 1]}, xlabel="d_k", logx=True)
    assert [l.get_label() for l in ax.get_lines()] == ["raw", "scaled"] and ax.get_xscale() == "log"
    ax = plotting.bar_plot(["e0", "e1", "e2", "e3"], [0, 2, 0, 1], ylabel="load")
    assert [p.get_height() for p in ax.patches] == [0, 2, 0, 1]
    assert [t.get_text() for t in ax.texts] == ["0", "2", "0", "1"]
    ax = plotting.scatter_labels(np.array([[0.0, 1.0], [2.0, 3.0]]), ["a", "teddy"])
    assert [t.get_text() for t in ax.texts] == ["a", "teddy"]


def test_spread_plot_shows_every_sample_and_the_mean_with_its_spread():
    groups = {"low": [0.1, 0.2, 0.3], "high": np.array([0.8, 1.0])}
    ax = plotting.spread_plot(groups, xlabel="setting", ylabel="distinct-2", title="T")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["low", "high"]
    dots = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections if len(c.get_offsets()) > 1])
    assert sorted(dots.round(6)) == [0.1, 0.2, 0.3, 0.8, 1.0], "every sample is drawn"
    assert ax.get_legend().get_texts()[0].get_text() == "mean ± std"
    means = [l for l in ax.get_lines() if len(l.get_xdata()) == 2 and l.get_marker() == "D"]
    assert means and np.allclose(means[0].get_ydata(), [0.2, 0.9]), "group means are plotted"
    assert ax.get_ylabel() == "distinct-2" and ax.get_xlabel() == "setting" and ax.get_title() == "T"
    with pytest.raises(ValueError, match="at least one"):
        plotting.spread_plot({})


def test_distribution_plot_labels_and_density_scale():
    rng = np.random.default_rng(0)
    ax = plotting.distribution_plot({"fp32": rng.normal(size=200), "nf4": torch.randn(100)}, xlabel="error", bins=10)
    assert ax.get_xlabel() == "error" and ax.get_ylabel() == "density"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fp32", "nf4"]
    with pytest.raises(ValueError, match="at least one"):
        plotting.distribution_plot({})


def test_bar_plot_refuses_mismatched_labels():
    with pytest.raises(ValueError, match="2 labels for 3 values"):
        plotting.bar_plot(["a", "b"], [1, 2, 3])
