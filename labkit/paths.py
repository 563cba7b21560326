"""Where labkit keeps things, and the prefix of every kernel-global name it creates.

Environment variables (all optional):
  LABKIT_STATE_DIR    per-lab state: ledgers, logs, progress          (default /var/lib/labkit)
  LABKIT_ANSWERS_DIR  students' answer files, <dir>/<lab>/<exercise>.yaml
                      (default ~/labkit-answers of the invoking user, also under sudo)
  LABKIT_PREFIX       prefix of network namespaces, cgroups and other global names (default "lk")
  LABKIT_LABS_PATH    extra directories holding labs (os.pathsep-separated), searched before the
                      built-in labs

The built-in labs are the repository's labs/ in a checkout; an installed labkit (wheel, sdist)
carries them as its package data labkit/_labs/ (pyproject.toml maps one to the other), without
their reference material (each lab's solutions/, mistakes/, mutants/): that is the instructor
package's, labkit_instructor/labs/<lab>/ (instructor/, `pip install 'labkit[instructor]'`).
"""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

from labkit.errors import LabkitError

_PACKAGE = Path(__file__).resolve().parent
BUILTIN_LABS = _PACKAGE / "_labs" if (_PACKAGE / "_labs").is_dir() else _PACKAGE.parent / "labs"

REFERENCE_KINDS = ("solutions", "mistakes", "mutants")

_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,5}$")


def state_root() -> Path:
    return Path(os.environ.get("LABKIT_STATE_DIR") or "/var/lib/labkit")


def invoking_user_home() -> Path:
    """The home of the user who ran labkit, also when it runs under sudo."""
    sudo_user = os.environ.get("SUDO_USER")
    if sudo_user:
        try:
            return Path(pwd.getpwnam(sudo_user).pw_dir)
        except KeyError:
            pass
    return Path.home()


def answers_root() -> Path:
    env = os.environ.get("LABKIT_ANSWERS_DIR")
    return Path(env) if env else invoking_user_home() / "labkit-answers"


def answer_path(lab_id: str, exercise_id: str) -> Path:
    """The file a student writes an exercise's answer to."""
    return answers_root() / lab_id / f"{exercise_id}.yaml"


def ensure_answers_dir(lab_id: str) -> Path:
    """<answers>/<lab>/, made if it is missing, so that the answer files the lab names can be
    written at once. Under sudo the directories labkit makes belong to the user who ran sudo:
    the student writes there, and a root-owned directory would refuse them."""
    root = answers_root()
    path = root / lab_id
    made = [p for p in (root, path) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if uid and gid and os.geteuid() == 0:
        for directory in made:
            os.chown(directory, int(uid), int(gid))
    return path


def prefix() -> str:
    """Short prefix of kernel-global names (netns, cgroups); kept short for 15-char link names."""
    value = os.environ.get("LABKIT_PREFIX") or "lk"
    if not _PREFIX_RE.match(value):
        raise LabkitError(
            f"LABKIT_PREFIX={value!r}: expected 1-6 lowercase letters or digits, starting with a letter"
        )
    return value


def labs_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("LABKIT_LABS_PATH", "").split(os.pathsep) if p]
    return extra + [BUILTIN_LABS]


def instructor_labs() -> Path | None:
    """labkit_instructor/labs/ of the installed instructor package, None without it. A package of
    another version than labkit's is refused: its solutions would be another release's."""
    import importlib.util
    from importlib import metadata

    spec = importlib.util.find_spec("labkit_instructor")
    if spec is None or not spec.origin:
        return None
    from labkit import __version__
    try:
        version = metadata.version("labkit-instructor")
    except metadata.PackageNotFoundError:
        version = None
    if version != __version__:
        raise LabkitError(f"labkit-instructor {version or '(of unknown version)'} does not go with labkit "
                          f"{__version__}: install labkit-instructor=={__version__}")
    return Path(spec.origin).parent / "labs"


def reference_file(lab_directory: Path, relpath: str) -> Path:
    """Where a lab's file is: in its directory; a reference file (solutions/, mistakes/, mutants/)
    of a built-in lab that an installed labkit carries without it, in the instructor package."""
    path = lab_directory / relpath
    if path.exists() or relpath.split("/", 1)[0] not in REFERENCE_KINDS:
        return path
    if lab_directory.resolve().parent != BUILTIN_LABS.resolve() or BUILTIN_LABS.name != "_labs":
        return path
    root = instructor_labs()
    return root / lab_directory.name / relpath if root is not None else path
