"""course_lib.recorded and data/gpu_recorded.csv: every recorded GPU figure is one a run printed
(its quote is in the report file it names), and every key a lesson asks for exists."""
import csv
import json
import re
from pathlib import Path

import pytest

from course_lib import recorded

REPO = Path(__file__).resolve().parents[2]
COLUMNS = ["key", "lesson", "value", "unit", "device", "driver", "torch", "cuda", "date", "commit",
           "sharing", "setup", "source", "quote"]
ROWS = list(csv.DictReader(recorded.CSV_PATH.open(newline="")))
# the lessons whose GPU-only points are shown beside the local figure (issues 25 and 29)
LESSONS_WITH_RECORDED = {"01", "04", "05", "06", "07", "08", "12", "14", "15", "16"}


def test_csv_has_the_columns_and_unique_keys():
    with recorded.CSV_PATH.open(newline="") as fh:
        assert next(csv.reader(fh)) == COLUMNS
    keys = [r["key"] for r in ROWS]
    assert len(keys) == len(set(keys)) and len(keys) >= 30


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["key"])
def test_row_is_what_the_run_printed(row):
    assert row["key"].startswith(row["lesson"] + ".")
    assert re.fullmatch(r"\d\d", row["lesson"])
    float(row["value"])
    assert row["unit"] and row["setup"] and row["device"]
    assert re.fullmatch(r"2\d{3}-\d\d-\d\d", row["date"]) and re.fullmatch(r"[0-9a-f]{7,40}", row["commit"])
    source = REPO / row["source"]
    assert row["source"].startswith("reports/") and source.is_file(), row["source"]
    text = source.read_text()
    assert row["quote"] in text, f"{row['quote']!r} is not in {row['source']}"
    assert row["value"] in row["quote"].replace(",", ""), "the value is not the one quoted"
    run_dir = REPO / Path(row["source"]).parts[0] / Path(row["source"]).parts[1]
    assert row["date"] in run_dir.name, "the date is not the run's"
    run_text = text + (run_dir / "README.md").read_text()
    for field in ("device", "driver", "torch"):
        assert row[field] in run_text, f"{field} {row[field]!r} is not named by the run"
    # the 2026-11-26 lessons 04-14 ran 4 notebooks at once on the GPU: say so
    assert (row["sharing"] == recorded.ALONE) == ("/parallel/" not in row["source"])


def test_loads_typed_figures():
    f = recorded.figure("05.cuda_graph_speedup")
    assert f.value == pytest.approx(9.6) and f.unit == "x" and f.lesson == "05"
    assert [g.key for g in recorded.for_lesson("14")][:1] == ["14.scale_gbs_block64"]
    assert set(recorded.figures()) == {r["key"] for r in ROWS}


def test_labels_name_device_date_and_sharing():
    shared = recorded.figure("08.epoch_60k_b1024_speedup")
    assert shared.label == "recorded on NVIDIA H100 80GB HBM3, 2026-11-26 (4 notebooks at once)"
    assert str(shared) == shared.label + ": 366.7x"
    alone = recorded.figure("08.gpu_speedup_over_cpu")
    assert alone.label == "recorded on NVIDIA H100 80GB HBM3, 2026-11-23"
    assert recorded.figure("14.scale_gbs_block1024").shown == "2663 GB/s"
    line = recorded.side_by_side("0.47x", "05.compile_speedup_mlp_512_256_128_2", threads=2)
    assert re.fullmatch(r"measured here on .+ \(CPU, 2 threads of \d+ logical cores\): 0\.47x; "
                        r"recorded on NVIDIA H100 80GB HBM3, 2026-11-23: 0\.61x", line), line
    text = recorded.on_gpu("12.bf16_over_fp32_n4096", "12.bf16_over_fp32_n8192")
    assert "5.44x" in text and "15x" in text and "gpu_recorded.csv" in text.splitlines()[0]


def test_unknown_key_and_duplicate_rows_fail(tmp_path):
    with pytest.raises(KeyError, match="no recorded GPU figure"):
        recorded.figure("05.no_such_figure")
    bad = tmp_path / "dup.csv"
    bad.write_text(recorded.CSV_PATH.read_text() + recorded.CSV_PATH.read_text().splitlines()[1] + "\n")
    with pytest.raises(ValueError, match="appears twice"):
        recorded.figures(bad)


def _keys_used(notebook: Path) -> set[str]:
    cells = json.loads(notebook.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return set(re.findall(r"""["'](\d\d\.[a-z0-9_]+)["']""", code)) if "recorded." in code else set()


def test_every_key_the_lessons_use_exists():
    used = {nb.parent.name[:2]: _keys_used(nb) for nb in sorted(REPO.glob("notebooks/*/lecture.ipynb"))}
    assert {lesson for lesson, keys in used.items() if keys} >= LESSONS_WITH_RECORDED
    missing = {k for keys in used.values() for k in keys} - set(recorded.figures())
    assert not missing, f"lessons ask for figures that data/gpu_recorded.csv lacks: {sorted(missing)}"
