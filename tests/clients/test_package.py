"""sluice-client stands alone: `pip install ./clients/python` gives a package that imports nothing
of this repository (it carries its own generated code), and that generated code is current."""

from __future__ import annotations

import ast
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "clients" / "python"
REPOSITORY_PACKAGES = {"sluice", "sluice_common", "sluice_cli", "sluice_ingest", "sluice_search", "sluice_worker"}


def test_the_generated_code_is_current():
    result = subprocess.run([sys.executable, str(SDK / "gen_stubs.py"), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_installed_package_works_without_the_repository(tmp_path):
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", str(SDK), "-w", str(tmp_path)], check=True, timeout=300)
    wheel = next(tmp_path.glob("sluice_client-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)], check=True, timeout=300)
    # `python -S`: no site processing, so none of the repository's editable installs (.pth files)
    # are on the path; grpcio and protobuf come from site-packages directly.
    path = f"{tmp_path / 'site'}:{site.getsitepackages()[0]}"
    probe = (
        "import sys, sluice_client, sluice_client.aio; print(sluice_client.__file__); "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe], env={"PYTHONPATH": path}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    where, loaded = result.stdout.splitlines()
    assert where.startswith(str(tmp_path / "site"))
    assert not REPOSITORY_PACKAGES & set(ast.literal_eval(loaded)), loaded
