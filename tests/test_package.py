"""labkit as an installed package: the sdist and the wheel built from this checkout carry every lab
and every file labkit reads at run time, except the labs' reference material (solutions, mistakes,
mutants), which is the instructor package's (instructor/, labkit-instructor). A student's venv
outside the checkout has no reference solution; an instructor's (labkit and labkit-instructor) runs
a lab's whole cycle (run, solve, check, cleanup).

The venvs get labkit's wheels and nothing else: their dependencies are the test venv's, reused
through a path entry (the test venv's own labkit is an editable install whose .pth file is not
read there), so the test needs no package index.
"""

import json
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from support import REPO

# The lab whose cycle the installed labkit runs: it also reads a NUMA machine fixture.
LAB = "numa"


def shipped_files(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every file under root, without Python's caches."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


REFERENCE = ("solutions", "mistakes", "mutants")


def is_reference(relpath: str) -> bool:
    """A lab's reference file (relative to labs/): <lab>/solutions/..., mistakes/..., mutants/..."""
    parts = Path(relpath).parts
    return len(parts) > 2 and parts[1] in REFERENCE


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and, built from it, the wheel (what `python -m build` does); and the instructor
    package's wheel, built from instructor/."""
    out = tmp_path_factory.mktemp("dist")
    for source, what in ((REPO, []), (REPO / "instructor", ["--wheel"])):
        built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", *what, "--outdir", str(out), str(source)],
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stdout + built.stderr
    (sdist,), (wheel,), (instructor,) = out.glob("labkit-*.tar.gz"), out.glob("labkit-*.whl"), out.glob("labkit_instructor-*.whl")
    return sdist, wheel, instructor


def make_venv(base: Path, wheels: list[Path]) -> Path:
    """A venv outside the checkout with these wheels installed; its bin directory."""
    assert REPO not in base.parents
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True, timeout=120)
    python = base / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                              "--disable-pip-version-check", "-q", *map(str, wheels)], capture_output=True, text=True,
                             timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "test-venv-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return base / "bin"


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    """An instructor's: labkit and labkit-instructor."""
    return make_venv(tmp_path_factory.mktemp("venv"), [dist[1], dist[2]])


@pytest.fixture(scope="module")
def student_venv(dist, tmp_path_factory):
    """A student's: labkit alone."""
    return make_venv(tmp_path_factory.mktemp("student-venv"), [dist[1]])


def test_sdist_carries_the_labs(dist):
    with tarfile.open(dist[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    wanted = {f"labs/{name}" for name in shipped_files(REPO / "labs")}
    assert not wanted - names, f"missing from the sdist: {sorted(wanted - names)[:10]}"


def test_installed_labkit_is_the_wheel_and_complete(venv, tmp_path):
    probe = subprocess.run([venv / "python", "-c", "import json, sys, labkit, labkit.paths as p; "
                            "print(json.dumps([labkit.__file__, str(p.BUILTIN_LABS), sys.path]))"],
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    module, labs, path = json.loads(probe.stdout)
    package = Path(module).parent
    assert package.is_relative_to(venv.parent) and Path(labs) == package / "_labs"
    assert REPO not in [Path(p).resolve() for p in path if p], "the checkout is on the installed labkit's sys.path"
    reference = package.parent / "labkit_instructor" / "labs"
    # byte for byte: the engine with its fixtures, every lab with its scenarios in labkit, and the
    # labs' solutions, mistakes and mutants in the instructor package, not in labkit
    labs_files = shipped_files(REPO / "labs")
    for want, installed in ((shipped_files(REPO / "labkit"), package),
                            ({k: v for k, v in labs_files.items() if not is_reference(k)}, package / "_labs"),
                            ({k: v for k, v in labs_files.items() if is_reference(k)}, reference)):
        have = shipped_files(installed)
        if installed == package:
            have = {k: v for k, v in have.items() if not k.startswith("_labs/")}
        missing = sorted(k for k in want if have.get(k) != want[k])
        assert not missing, f"not in {installed} as in the checkout: {missing[:10]}"
        assert not sorted(set(have) - set(want)), f"more in {installed} than the checkout has: {sorted(set(have) - set(want))[:10]}"
    assert any(is_reference(k) for k in labs_files) and any(not is_reference(k) for k in labs_files)


def test_a_students_install_has_no_reference_material(student_venv, tmp_path):
    """labkit alone: no lab carries solutions, mistakes or mutants, and asking for a reference
    solution says where instructors get them."""
    code = ("import json, labkit.paths as p\nfrom labkit.labs import get_lab\nlab = get_lab('numa')\n"
            "files = [str(f.relative_to(p.BUILTIN_LABS)) for f in p.BUILTIN_LABS.rglob('*') if f.is_file()]\n"
            "try:\n    lab.solution_function(lab.exercises[0]); said = None\n"
            "except Exception as exc:\n    said = str(exc)\n"
            "print(json.dumps([files, said, len(lab.mistakes(lab.exercises[0]))]))")
    probe = subprocess.run([student_venv / "python", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    files, said, mistakes = json.loads(probe.stdout)
    assert files and not [f for f in files if is_reference(f)]
    assert "no reference solution for numa/" in said and "pip install 'labkit[instructor]'" in said
    assert mistakes == 0


@pytest.mark.host_compared
def test_installed_labkit_runs_a_lab_cycle_from_anywhere(venv, tmp_path, host_unchanged):
    labkit = str(venv / "labkit")

    def run(*args, code=0):
        result = subprocess.run([labkit, *args], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert result.returncode == code, f"labkit {' '.join(args)}: exit {result.returncode}\n{result.stdout}{result.stderr}"
        return result.stdout

    builtin = sorted(p.name for p in (REPO / "labs").iterdir() if (p / "lab.yaml").is_file())
    listed = run("list")
    # the built-in labs from the package, and an instructor's lab from LABKIT_LABS_PATH (conftest: tests/labs)
    assert all(name in listed for name in builtin + ["demo"]), listed
    assert "Demo lab" in run("show", "demo")
    try:
        run("run", LAB)
        exercises = [r["exercise"] for r in json.loads(run("check", LAB, "-o", "json", code=1))["results"]]
        for exercise in exercises:
            run("solve", LAB, exercise)
        report = json.loads(run("check", LAB, "-o", "json"))
        assert report["passed"] == report["total"] == len(exercises) > 0
    finally:
        run("cleanup", LAB)


def test_the_wheel_says_what_it_is_and_where_it_runs(dist):
    """One version (labkit/__init__.py's), Linux-only classifiers, and the netlink binding only
    where it can install: an instructor grades a class from any laptop. Nothing to compile:
    python-iptables (a C extension, no wheel) is no dependency (labkit/netfilter/live.py)."""
    import zipfile

    import labkit
    with zipfile.ZipFile(dist[1]) as wheel:
        [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = wheel.read(name).decode()
    assert f"\nVersion: {labkit.__version__}\n" in metadata
    assert dist[1].name.startswith(f"labkit-{labkit.__version__}-")
    assert "Classifier: Operating System :: POSIX :: Linux" in metadata
    assert "python-iptables" not in metadata
    assert "Provides-Extra: instructor" in metadata and "Requires-Dist: labkit-instructor; extra == 'instructor'" in metadata
    with zipfile.ZipFile(dist[2]) as wheel:
        [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        instructor = wheel.read(name).decode()
    assert f"\nVersion: {labkit.__version__}\n" in instructor
    assert f"Requires-Dist: labkit=={labkit.__version__}\n" in instructor
    assert "Requires-Dist: pyroute2<1,>=0.7; sys_platform == 'linux'" in metadata
