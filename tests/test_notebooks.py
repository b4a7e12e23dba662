"""Every notebook runs where Jupyter opens it and shows its figures.

Each notebook under ``notebooks/`` is executed with papermill from its own folder (as
JupyterLab starts its kernel) on small tables under ``tests/fixtures/notebooks/`` (subsets
of real pipeline outputs; ``tests/fixtures/notebooks/README.md`` says where each comes
from); every executed notebook must hold at least one ``image/png`` output and no error,
and its ``nbconvert --to html`` page must embed the image. The notebooks run in parallel
(one kernel each) once per session.

Beside them: a notebook re-run with its defaults from a fresh checkout layout finds its
inputs from the repository root and writes to ``results/scratch/``; a missing input names
the Snakemake command that makes it; and JupyterLab, started on loopback, renders an
executed notebook's figure in headless Chromium.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
import papermill as pm
import pytest
from nbconvert import HTMLExporter
from PIL import Image

from commsched.errors import CommschedError
from commsched.explore import paper_vs_ours
from commsched.paths import figure_path, repo_path, repo_root
from commsched.plotting import check_figure_inputs
from commsched.results import read_table

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
FIX = ROOT / "tests" / "fixtures" / "notebooks"
HTML = HTMLExporter()  # one exporter: its templates load once


def _f(name: str) -> str:
    return str(FIX / name)


#: (test id, notebook, parameters): every notebook at least once, on fixture tables.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("toys", "toys", {"table": _f("toys_makespans.csv")}),
    ("tictac_workers", "tictac_scaling", {"table": _f("tictac_workers.csv"), "kind": "workers"}),
    ("tictac_arxiv", "tictac_models", {"table": _f("tictac_arxiv.csv"), "kind": "arxiv"}),
    ("tictac_steptime", "tictac_steptime", {"table": _f("tictac_steptime.csv"),
                                            "metrics": _f("tictac_metrics.csv")}),
    ("live", "live", {"summary": _f("live_skipped.csv"), "steps": _f("live_skipped.csv"),
                      "transfers": _f("live_skipped.csv"), "kind": "gain"}),
    ("echelon_live", "echelon_live", {"summary": _f("echelon_live_summary.csv"),
                                      "jobs": _f("echelon_live_jobs.csv"), "kind": "jct"}),
    ("echelon_live_prediction", "echelon_live", {
        "summary": _f("echelon_live_summary.csv"), "jobs": _f("echelon_live_jobs.csv"),
        "kind": "prediction"}),
    ("allreduce_fit", "allreduce_fit", {"summary": _f("allreduce_summary.csv"),
                                        "fit": _f("allreduce_fit.csv")}),
    ("grad_sizes", "grad_sizes", {"table": _f("grad_sizes.csv")}),
    ("pace_sim_bandwidth", "pace_speed", {"table": _f("pace_sim_bandwidth.csv"),
                                          "kind": "bandwidth"}),
    ("pace_sim_usage", "pace_usage", {"table": _f("pace_sim_usage.csv")}),
    ("pace_live", "pace_live", {"summary": _f("pace_live_skipped.csv"),
                                "link": _f("pace_live_skipped.csv"),
                                "allreduces": _f("pace_live_skipped.csv")}),
    ("placement_tensorflow", "placement_bars", {"table": _f("placement_tensorflow.csv"),
                                                "kind": "makespan"}),
    ("placement_tensorflow_traffic", "placement_bars", {
        "table": _f("placement_tensorflow.csv"), "kind": "traffic"}),
    ("placement_seven_gantt", "placement_seven", {"table": _f("placement_seven_gantt.csv"),
                                                  "kind": "gantt"}),
    ("echelon_core", "echelon_core", {"fig2": _f("echelon_core_fig2.csv"),
                                      "gaps": _f("echelon_core_gaps.csv")}),
    ("echelon_eval_ratios", "echelon_eval", {"jobs": _f("echelon_eval_jobs.csv"),
                                             "iterations": _f("echelon_eval_iterations.csv"),
                                             "kind": "ratios"}),
    ("echelon_replay", "echelon_replay", {
        "tables": ",".join(f"{s}={_f(f'echelon_replay_{s}.csv')}"
                           for s in ("fair", "fair-ports", "fifo", "sebf")),
        "bins": _f("echelon_replay_bins.csv")}),
]


def _execute(case: tuple[str, str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """Run one case; return the executed notebook (or the error) and the figure paths."""
    cid, name, params = case
    pdf = out / f"{cid}.pdf"
    result: dict[str, Any] = {"pdf": pdf, "nb": out / f"{cid}.ipynb", "error": None}
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(result["nb"]),
                            parameters={**params, "figure": str(pdf),
                                        "claims": _f("claims.csv")},
                            cwd=str(NOTEBOOKS), kernel_name="python3", progress_bar=False,
                            execution_timeout=120)
    except Exception as e:  # reported by the test of this case
        result["error"] = f"{type(e).__name__}: {e}"
    result["seconds"] = time.perf_counter() - t0
    return result


@pytest.fixture(scope="session")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every case executed once, in parallel (a kernel per notebook)."""
    out = tmp_path_factory.mktemp("notebooks")
    env_backend = os.environ.pop("MPLBACKEND", None)  # as in JupyterLab: no backend forced
    # papermill changes the process's working directory around each run (cwd=notebooks/);
    # from several threads the restores interleave, so put it back for the tests after
    cwd = os.getcwd()
    try:
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            results = list(pool.map(lambda c: _execute(c, out), CASES))
    finally:
        os.chdir(cwd)
        if env_backend is not None:
            os.environ["MPLBACKEND"] = env_backend
    return {c[0]: r for c, r in zip(CASES, results, strict=True)}


def _png_outputs(nb: nbformat.NotebookNode) -> list[str]:
    return [o["data"]["image/png"] for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "image/png" in o.get("data", {})]


def test_every_notebook_has_a_case() -> None:
    assert {c[1] for c in CASES} == {p.stem for p in NOTEBOOKS.glob("*.ipynb")}


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_cell_has_an_id(path: Path) -> None:
    """nbformat 4.5 requires cell ids: without them nbformat warns and will refuse."""
    nb = json.loads(path.read_text())
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    assert all("id" in c for c in nb["cells"]), f"{path.name}: run nbformat's normalize()"


@pytest.mark.parametrize("cid", [c[0] for c in CASES])
def test_notebook_shows_its_figure(executed: dict[str, dict[str, Any]], cid: str) -> None:
    r = executed[cid]
    assert r["error"] is None, r["error"]
    nb = nbformat.read(r["nb"], as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    pngs = _png_outputs(nb)
    assert pngs, f"{cid}: no image/png output"
    assert base64.b64decode(pngs[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert r["pdf"].is_file() and r["pdf"].with_suffix(".png").is_file()
    html, _ = HTML.from_notebook_node(nb)
    assert "data:image/png;base64," in html, f"{cid}: nbconvert's HTML has no image"
    # the paper-vs-ours cell printed where its rows come from
    assert any("claims" in "".join(o.get("text", "")) for c in nb.cells
               if c.cell_type == "code" for o in c.get("outputs", [])), cid


def _fake_checkout(tmp: Path) -> Path:
    """The least a notebook needs of a checkout: Snakefile, claims files, one table."""
    (tmp / "Snakefile").write_text("# stand-in\n")
    shutil.copytree(ROOT / "papers" / "claims", tmp / "papers" / "claims")
    (tmp / "notebooks").mkdir()
    shutil.copy(NOTEBOOKS / "toys.ipynb", tmp / "notebooks")
    (tmp / "results" / "tables").mkdir(parents=True)
    shutil.copy(FIX / "toys_makespans.csv", tmp / "results" / "tables")
    return tmp


def test_rerun_with_defaults_writes_to_scratch(tmp_path: Path) -> None:
    """Opened by hand: no parameter given, the kernel in notebooks/; the table is found
    from the root, the figure goes to results/scratch/, the claims are judged now."""
    root = _fake_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("COMMSCHED_ROOT", "MPLBACKEND")}
    out = root / "notebooks" / "toys.out.ipynb"
    r = subprocess.run([sys.executable, "-m", "papermill", "toys.ipynb", out.name,
                        "--cwd", ".", "--no-progress-bar"], cwd=root / "notebooks",
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (root / "results" / "scratch" / "toys_makespan.png").is_file()
    assert not (root / "results" / "figures").exists()
    nb = nbformat.read(out, as_version=4)
    assert _png_outputs(nb)
    text = json.dumps(nb.cells)
    assert "judged now" in text and "pending" in text


def test_paths_resolve_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_checkout(tmp_path)
    monkeypatch.delenv("COMMSCHED_ROOT", raising=False)
    monkeypatch.chdir(root / "notebooks")
    assert repo_root() == root
    assert repo_path("results/tables/x.csv") == str(root / "results/tables/x.csv")
    assert repo_path("/abs/x.csv") == "/abs/x.csv"
    assert figure_path("", "toys") == str(root / "results/scratch/toys.pdf")
    assert figure_path("results/figures/t.pdf", "toys") == str(root / "results/figures/t.pdf")
    monkeypatch.setenv("COMMSCHED_ROOT", str(root / "notebooks"))
    with pytest.raises(CommschedError, match="not a commsched checkout"):
        repo_root()


def test_missing_input_names_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_checkout(tmp_path)
    monkeypatch.delenv("COMMSCHED_ROOT", raising=False)
    monkeypatch.chdir(root / "notebooks")
    missing = repo_path("results/tables/pace_sim_workers.csv")
    with pytest.raises(CommschedError) as e:
        check_figure_inputs("pace_sim", {"table": missing}, "f.pdf", "rule pace_sim_run")
    msg = str(e.value)
    assert missing in msg
    assert f"`snakemake --cores 1 results/tables/pace_sim_workers.csv` in {root}" in msg
    assert "\n" not in msg


def test_paper_vs_ours_rows() -> None:
    rows = paper_vs_ours(["tictac-par32-*", "tictac-seq32-one-best-order"], _f("claims.csv"))
    assert list(rows.columns) == ["id", "where", "paper_value", "ours", "status", "reason"]
    assert set(rows.id) == {"tictac-par32-every-order-best", "tictac-seq32-one-best-order"}
    assert "claims.csv" in rows.attrs["source"]
    with pytest.raises(CommschedError, match="no claim matches 'tictac-nope'"):
        paper_vs_ours(["tictac-nope"], _f("claims.csv"))


def test_paper_vs_ours_judges_rows_an_older_claims_table_lacks(tmp_path: Path) -> None:
    """A claims table written before a row was added (an earlier run) is no error: the
    rows are judged now from the claims files."""
    old = read_table(_f("claims.csv"))
    old = old[old.id != "tictac-seq32-one-best-order"]
    old.to_csv(tmp_path / "claims.csv", index=False)
    rows = paper_vs_ours(["tictac-par32-*", "tictac-seq32-one-best-order"],
                         tmp_path / "claims.csv")
    assert set(rows.id) == {"tictac-par32-every-order-best", "tictac-seq32-one-best-order"}
    assert rows.attrs["source"].startswith("judged now")
    assert "has no row 'tictac-seq32-one-best-order'" in rows.attrs["source"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, timeout: float) -> None:
    end = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.5)


def test_jupyterlab_renders_a_figure_in_chromium(executed: dict[str, dict[str, Any]],
                                                 tmp_path: Path) -> None:
    """JupyterLab on loopback (bounded, torn down by pid) opens an executed notebook in
    headless Chromium; the rendered page holds the figure as an image and the screenshot
    is not blank."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (scripts/bootstrap-system.sh "
                    "installs Debian's chromium when run as root)")
    r = executed["toys"]
    assert r["error"] is None, r["error"]
    lab_root = tmp_path / "lab"
    lab_root.mkdir()
    shutil.copy(r["nb"], lab_root / "toys.ipynb")
    port, token = _free_port(), "commsched-test"
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={lab_root}", "--ServerApp.open_browser=False",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate", "--allow-root"],
        cwd=lab_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=90)
        url = f"http://127.0.0.1:{port}/lab/tree/toys.ipynb?token={token}"
        shot = tmp_path / "shot.png"
        common = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                  "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
                  "--window-size=1280,2400", "--virtual-time-budget=30000"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                             timeout=150)
        assert "jp-RenderedImage" in dom.stdout, dom.stderr[-2000:]
        assert "data:image/png;base64," in dom.stdout
        subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True,
                       timeout=150, check=True)
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(timeout=10)
    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100, "the screenshot is blank"


def test_readme_names_the_notebooks_that_exist() -> None:
    """The notebook column of the README's claims table names files under notebooks/."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Claims and where they come from", 1)[1].split("\n## ", 1)[0]
    named = set()
    for row in table.splitlines():
        cells = [c.strip() for c in row.split(" | ")]
        if row.startswith("| `") and len(cells) >= 4:
            named |= {n for n in re.findall(r"`([\w.]+\.ipynb)`", cells[3].split("(run as")[0])}
    assert named, "no notebook found in the README's claims table"
    missing = sorted(n for n in named if not (NOTEBOOKS / n).is_file())
    assert not missing, missing
