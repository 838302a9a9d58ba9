"""What students receive back: nbgrader feedback without hidden tests.

``RedactHiddenTests`` runs inside ``nbgrader generate_feedback`` (before nbgrader's own
``ClearHiddenTests`` removes the hidden lines from the test cells' source). It rewrites the
outputs of test cells that contain hidden tests: a failure's traceback (which would quote
hidden lines) becomes one line, and the message of a failing hidden check (its name, input
and expected value) is replaced by "a hidden test failed"; "ok: NAME" lines of hidden checks
are dropped.
"""
from __future__ import annotations

import json
import re
import subprocess

from nbgrader.preprocessors import NbGraderPreprocessor

from .nbgrader_course import CourseDir, GradingError

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.S)


def visible_part(source: str) -> str:
    """The test cell's source without its hidden-test regions."""
    return HIDDEN.sub("", source)


def _shown(message: str, visible: str) -> bool:
    name = message.split(": expected", 1)[0].strip()
    return bool(name) and name in visible


def redact_outputs(outputs: list, visible: str) -> list:
    """Outputs of a test cell with everything that would reveal hidden tests removed."""
    kept = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "error":
            evalue = out.get("evalue", "")
            from_a_check = out.get("ename") in ("CheckFailed", "AssertionError", "IntegrityError")
            if from_a_check and not _shown(evalue, visible):
                evalue = "a hidden test failed (hidden tests are not shown)"
            out = {**out, "evalue": evalue, "traceback": [f"{out.get('ename', 'Error')}: {evalue}"]}
        elif kind == "stream":
            lines = [ln for ln in out.get("text", "").splitlines(keepends=True)
                     if not ln.startswith("ok: ") or _shown(ln[4:].rstrip("\n") + ": expected", visible)]
            if not lines:
                continue
            out = {**out, "text": "".join(lines)}
        kept.append(out)
    return kept


def hidden_lines(sources: list[str]) -> set[str]:
    """The non-trivial lines inside hidden-test regions of these cell sources."""
    lines = set()
    for source in sources:
        for region in HIDDEN.findall(source):
            lines.update(ln.strip() for ln in region.splitlines() if len(ln.strip()) >= 8)
    return lines


def scrub(outputs: list, secret: set[str]) -> list:
    """Outputs with every line that quotes a hidden test line replaced by a notice (student code
    that captured the test cells' code and printed it later must not reveal them)."""
    if not secret:
        return outputs
    notice = "[a line quoting a hidden test was removed]"

    def clean(text: str) -> str:
        return "".join(notice + "\n" if any(h in ln for h in secret) else ln for ln in text.splitlines(keepends=True))

    kept = []
    for out in outputs:
        out = dict(out)
        if "text" in out:
            out["text"] = clean(out["text"])
        if isinstance(out.get("data"), dict):
            out["data"] = {k: clean(v) if isinstance(v, str) else v for k, v in out["data"].items()}
        if "traceback" in out:
            out["traceback"] = [clean(t) for t in out["traceback"]]
        kept.append(out)
    return kept


class RedactHiddenTests(NbGraderPreprocessor):
    """nbgrader preprocessor: see the module docstring."""

    def preprocess(self, nb, resources):
        self._secret = hidden_lines([c.source for c in nb.cells if c.cell_type == "code"])
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        from nbformat import from_dict

        if cell.cell_type != "code":
            return cell, resources
        meta = cell.metadata.get("nbgrader", {})
        outputs = cell.outputs
        if meta.get("grade") and "BEGIN HIDDEN TESTS" in cell.source:
            outputs = redact_outputs(outputs, visible_part(cell.source))
        cell.outputs = [from_dict(o) for o in scrub(outputs, getattr(self, "_secret", set()))]
        return cell, resources


def generate_feedback(course: CourseDir, lesson: str) -> subprocess.CompletedProcess:
    """nbgrader feedback (HTML) with hidden tests and their outputs removed."""
    preprocessors = ["nbgrader.preprocessors.GetGrades", f"{RedactHiddenTests.__module__}.RedactHiddenTests",
                     "nbgrader.preprocessors.ClearHiddenTests",
                     "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"]
    done = course.nbgrader("generate_feedback", lesson, "--force",
                           f"--GenerateFeedback.preprocessors={json.dumps(preprocessors)}")
    if done.returncode != 0:
        raise GradingError(f"nbgrader generate_feedback {lesson} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done

