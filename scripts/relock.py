"""Regenerate requirements.lock and environment.yml from the current .venv.

Usage: install requirements.in into .venv, then `python scripts/relock.py`.
environment.yml carries exactly the pins of requirements.lock (tests/test_env_lock.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    freeze = subprocess.run(
        [str(ROOT / ".venv/bin/pip"), "freeze", "--exclude-editable", "--disable-pip-version-check"],
        capture_output=True, text=True, check=True,
    ).stdout
    pins = sorted(
        (line for line in freeze.splitlines() if "==" in line and not line.startswith("commsched")),
        key=str.lower,
    )
    (ROOT / "requirements.lock").write_text("\n".join(pins) + "\n")
    env = [
        "# conda users: conda env create -f environment.yml && conda activate commsched",
        "# then: pip install --no-deps -e .   (pins equal requirements.lock; see scripts/relock.py)",
        "name: commsched",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        f"  - python={sys.version_info.major}.{sys.version_info.minor}",
        "  - pip",
        "  - pip:",
        *[f"      - {p}" for p in pins],
    ]
    (ROOT / "environment.yml").write_text("\n".join(env) + "\n")
    print(f"{len(pins)} pins written to requirements.lock and environment.yml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
