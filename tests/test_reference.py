"""The committed reference run (results/reference/, `make record-reference`): a readable
claims table from a clean checkout, figures that are real images, and a README whose
headline counts are that table's."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

from commsched.claims import compare_claims
from commsched.results import read_provenance

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "results" / "reference"


def _per_paper_table(claims_md: str) -> str:
    """The per-paper counts table of a claims.md (from its header row to the 'all' row)."""
    m = re.search(r"^\| paper \| claims \|.*?^\| all \|[^\n]*$", claims_md, re.M | re.S)
    assert m, "claims.md has no per-paper table"
    return m.group(0)


def test_reference_claims_table_is_a_clean_runs():
    csv = REF / "claims.csv"
    differences, compared = compare_claims(csv, csv)
    assert differences == [] and compared > 0
    revision = str(read_provenance(csv)["git_revision"])
    assert revision and not revision.endswith("-dirty"), revision


def test_readme_quotes_the_reference_runs_counts():
    readme = (ROOT / "README.md").read_text()
    assert _per_paper_table((REF / "claims.md").read_text()) in readme
    revision = str(read_provenance(REF / "claims.csv")["git_revision"])
    assert f"`{revision[:7]}`" in readme


def test_reference_figures_are_real_images():
    pngs = sorted((REF / "figures").glob("*.png"))
    assert pngs
    for png in pngs:
        with Image.open(png) as im:
            pixels = np.asarray(im.convert("L"))
        assert pixels.min() < pixels.max(), f"{png.name} is blank"
