"""Every diagram of the lectures draws, fits a slide and says in words what it shows."""
import matplotlib

matplotlib.use("Agg")

import io  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from course_lib import diagrams  # noqa: E402

MAX_WIDTH_PX, MAX_HEIGHT_PX = 1200, 560   # room on a 1280 x 720 slide under a title


@pytest.mark.parametrize("name", diagrams.names())
def test_diagram_draws_fits_a_slide_and_has_alt_text(name):
    module = diagrams.load(name)
    assert isinstance(module.ALT, str) and len(module.ALT.split()) >= 8, "alt text: say what the picture shows"
    fig = module.draw()
    try:
        assert fig.axes, "a diagram draws on at least one axes"
        width, height = Image.open(io.BytesIO(diagrams.png(fig))).size
    finally:
        plt.close(fig)
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX, f"{width} x {height} px does not fit a slide"


def test_show_puts_the_alt_text_on_the_image(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw, metadata: shown.append((data, metadata)))
    name = diagrams.names()[0]
    diagrams.show(name)
    data, metadata = shown[0]
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert metadata["image/png"]["alt"] == diagrams.load(name).ALT


def test_an_unknown_diagram_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="no diagram 'nope'; known: "):
        diagrams.load("nope")
