"""The installed distribution: one import name, and a worker of your own beside chamvi's.

Builds the wheel, installs it into a fresh virtual environment (its dependencies are reached through
this environment's site-packages, so nothing is downloaded but the build backend), and runs the
README's "Use chamvi in your own Temporal worker" files in a throwaway project that has its own
``workflows`` and ``activities`` packages, against the test session's Temporal server.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from temporalio.client import Client

ROOT = Path(__file__).parents[2]
SECTION = "## Use chamvi in your own Temporal worker"


def readme_files(title: str = SECTION) -> dict[str, str]:
    """The python blocks of the README section ``title``, by the path each names on its first line."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(title) :]
    section = section[: section.index("\n## ", len(title))]
    files: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.DOTALL):
        first, _, body = block.partition("\n")
        assert first.startswith("# "), f"a block of the section names no file: {first!r}"
        files[first[2:].strip()] = body
    return files


def readme_module(title: str, filename: str, folder: Path) -> ModuleType:
    """The README section's only python file, written to ``folder`` and imported as a reader would."""
    files = readme_files(title)
    assert set(files) == {filename}
    (folder / filename).write_text(files[filename])
    spec = importlib.util.spec_from_file_location(f"readme_{Path(filename).stem}", folder / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    for relative, body in readme_files().items():
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
