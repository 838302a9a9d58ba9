"""The widget builders and the plots under them."""
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

from course_lib.parallel import widgets  # noqa: E402


def test_ring_state_counts_contributions():
    assert (widgets.ring_state(4, 0) == 1).all()
    assert (widgets.ring_state(4, 6) == 4).all()
    after_rs = widgets.ring_state(4, 3)
    assert [after_rs[r, (r + 1) % 4] for r in range(4)] == [4, 4, 4, 4]


def test_plots_draw():
    ax = widgets.plot_strategies(160e6, 4, 16e9)
    assert len(ax.patches) == len(widgets.collectives.STRATEGIES)
    assert len(widgets.plot_scaling(max_n=8).lines) == len(widgets.collectives.STRATEGIES)
    ys = widgets.plot_servers(160e6, 8, 1e9, max_servers=4).lines[0].get_ydata()
    assert np.allclose(ys, [1.28, 0.64, 1.28 / 3, 0.32])
    widgets.plot_ring_state(3, 2)


def test_widgets_build():
    for build in (widgets.strategies_widget, widgets.servers_widget, widgets.ring_step_widget):
        assert build().children
