"""The installed distribution: one import name, and a worker of your own beside chamvi's.

Builds the wheel, installs it into a fresh virtual environment (its dependencies are reached through
this environment's site-packages, so nothing is downloaded but the build backend), and runs the
docs page "Use chamvi in your own Temporal worker"'s files
(``docs/guides/own-worker.md``) in a throwaway project that has its own
``workflows`` and ``activities`` packages, against the test session's Temporal server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.docs import python_files

ROOT = Path(__file__).parents[2]
PAGE = "guides/own-worker.md"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("chamvi_temporal-*.whl")
    return built


def test_the_wheel_claims_no_top_level_name_but_chamvi(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"chamvi"}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"chamvi/workflows/agent_run.py", "chamvi/activities/tools.py"} <= names


def test_the_wheel_carries_the_approvals_page(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"chamvi/http/ui/index.html", "chamvi/http/ui/app.js", "chamvi/http/ui/app.css"} <= names


async def test_a_project_with_its_own_workflows_and_activities_runs_chamvi_beside_them(
    wheel: Path, tmp_path: Path, client: Client
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # the dependencies, from this environment; a path line adds the folder, not its .pth files, so
    # this checkout's editable install stays out
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "project"
    for relative, body in python_files(PAGE).items():
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    for package in ("workflows", "activities"):
        (project / package / "__init__.py").touch()

    unset = ("PYTHONPATH", "QDRANT_URL", "TEMPORAL_NAMESPACE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["TEMPORAL_ADDRESS"] = client.service_client.config.target_host
    env["CHAMVI_DATA"] = str(tmp_path / "data")
    probe = "import chamvi, workflows, activities; print(chamvi.__file__, workflows.__file__)"
    where = subprocess.run(
        [str(python), "-c", probe],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert where == [str(site / "chamvi" / "__init__.py"), str(project / "workflows" / "__init__.py")]

    ran = subprocess.run(
        [str(python), "run_worker.py"], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    greeting, status, output = ran.stdout.strip().split(" | ", 2)
    assert (greeting, status) == ("Hello, Ada!", "completed")
    assert "HELLO" in output
