"""The workshop, booted: student VMs from the offline box, every lab's cycle inside one, grading.

Run by scripts/test-workshop inside private mount, network and PID namespaces (see there). In
them this harness

  1. starts its own libvirt (virtlogd, libvirtd) whose configuration, state, images and logs live
     in a scratch directory bind-mounted over /etc/libvirt, /var/lib/libvirt, ...: the host's
     libvirt, network and files are never touched, and the VMs have no way out to any network, so
     the run also proves that the box needs none;
  2. picks the accelerator: KVM when a VM really boots with it (a probe boots the box's disk
     with qemu -accel kvm -cpu host and waits for the login prompt), else QEMU software emulation;
  3. `vagrant up` of N students with the project's Vagrantfile and the offline box;
  4. on student-01, for every lab: `labkit run` (timed: the first run inside a fresh VM),
     `labkit check` (every exercise must fail fresh), `labkit solve` of every exercise in order,
     `labkit check` (every exercise must pass), `labkit cleanup`, and a comparison of the VM
     before and after (tests/support.py's host_snapshot, plus kernel modules and net sysctls);
  5. with --tests: the given test files of this checkout run with pytest on student-01, against
     the box's installed labkit (pytest and its pure-Python dependencies are copied from this
     checkout's .venv: the VMs have no network to install them);
  6. grading: a lab that passed its cycle is started on every VM and solved again on student-01;
     `labkit class grade` over `vagrant ssh-config` must grade every VM, student-01 with full
     marks and the others (fresh labs) with 0 points; then that lab is cleaned up everywhere;
  7. `vagrant destroy`, the daemons stopped, the scratch directory removed.

Prints what failed and the figures (scripts/benchmarks' table); exit 0 only when everything
passed.
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))
from figures import Figure, print_table  # noqa: E402

BOX = "labkit-workshop"
SNAPSHOT = REPO / "tests" / "support.py"       # host_snapshot(): what "the machine as it was" means
LIBVIRT_DIRS = ("/etc/libvirt", "/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt")
QEMU_CONF = """
# labkit test-workshop: a private libvirt for throwaway VMs
user = "root"
group = "root"
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
"""
# what the target OS is, as seen inside a VM
FACTS = """
echo "Debian $(cat /etc/debian_version), kernel $(uname -r), $(nproc) CPUs, $(free -m | awk '/^Mem/ {print $2 " MiB, " $2 - $7 " in use"}')"
echo "cgroup file system: $(stat -fc %T /sys/fs/cgroup)"
echo "$(iptables --version)"
echo "kubectl $(kubectl version --client -o json | jq -r .clientVersion.gitVersion)"
echo "br_netfilter loaded: $(test -d /sys/module/br_netfilter && echo yes || echo no)"
"""
# what the VM snapshot adds to host_snapshot(): loaded modules and net sysctls (compared)
VM_SNAPSHOT = """
import json, sys
from pathlib import Path
sys.path.insert(0, "/tmp/labkit-workshop")
from support import host_snapshot
snap = host_snapshot()
snap["sysctl"] = {str(p): p.read_text().strip() for p in sorted(Path("/proc/sys/net/bridge").glob("*"))
                  + [Path("/proc/sys/net/ipv4/ip_forward")] if p.is_file()}
snap["modules"] = sorted(line.split()[0] for line in open("/proc/modules"))
print(json.dumps(snap))
"""
# what pytest needs beside the box's labkit, copied from this checkout's venv (pure Python)
TEST_TOOLS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py.py")
TESTS_DIR = "/tmp/labkit-workshop-tests"


def say(message: str) -> None:
    print(message, flush=True)


class Failed(Exception):
    """A step of the workshop went wrong; the message says which and why."""


@dataclass
class LabCycle:
    lab: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)
    score: str = ""


class Workshop:
    def __init__(self, args, scratch: Path):
        self.args = args
        self.scratch = scratch
        self.inventory = scratch / "inventory"
        self.daemons: list[int] = []
        self.figures: list[Figure] = []
        self.problems: list[str] = []
        self.env = {
            **os.environ,
            "VAGRANT_CWD": str(REPO), "VAGRANT_HOME": str(scratch / "vagrant.d"),
            "VAGRANT_DOTFILE_PATH": str(scratch / "vagrant-machines"), "VAGRANT_DEFAULT_PROVIDER": "libvirt",
            "VAGRANT_CHECKPOINT_DISABLE": "1", "VAGRANT_BOX_UPDATE_CHECK_DISABLE": "1",
            "LABKIT_BOX": BOX, "LABKIT_BOX_DIR": str(args.box_dir), "LABKIT_STUDENTS": str(args.students),
            "LABKIT_VM_CPUS": str(args.cpus), "LABKIT_VM_MEMORY": str(args.memory),
        }

    # -- the private libvirt -----------------------------------------------------------------------
    def start_libvirt(self) -> None:
        run(["ip", "link", "set", "lo", "up"])
        # this network namespace's sysfs (libvirt looks at its bridges there) and an empty /run
        run(["mount", "-t", "sysfs", "sysfs", "/sys"])
        run(["mount", "-t", "tmpfs", "tmpfs", "/run"])
        for directory in LIBVIRT_DIRS:
            private = self.scratch / directory.strip("/").replace("/", "-")
            if Path(directory).is_dir():
                shutil.copytree(directory, private, symlinks=True)
            else:
                raise Failed(f"{directory} is missing: is libvirt installed (scripts/setup workshop)?")
            run(["mount", "--bind", str(private), directory])
        for link in Path("/etc/libvirt/qemu/networks/autostart").glob("*"):
            link.unlink()       # libvirt's "default" network: vagrant-libvirt makes its own
        with open("/etc/libvirt/qemu.conf", "a") as conf:
            conf.write(QEMU_CONF)
        Path("/run/libvirt").mkdir()
        for daemon in ("virtlogd", "libvirtd"):
            proc = subprocess.Popen([daemon], stdout=subprocess.DEVNULL, stderr=open(self.scratch / f"{daemon}.log", "w"))
            self.daemons.append(proc.pid)
        if not wait_for(lambda: run(["virsh", "-c", "qemu:///system", "version"], check=False).returncode == 0, 60):
            raise Failed(f"libvirtd did not start: {(self.scratch / 'libvirtd.log').read_text()[-1000:]}")

    def stop_libvirt(self) -> None:
        for pid in reversed(self.daemons):
            try:
                os.kill(pid, 15)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    # -- the accelerator ------------------------------------------------------------------------------
    def choose_driver(self) -> str:
        if self.args.driver != "auto":
            return self.args.driver
        if not os.access("/dev/kvm", os.R_OK | os.W_OK):
            say("   /dev/kvm is not usable: QEMU software emulation")
            return "qemu"
        probe = self.scratch / "kvm-probe"
        probe.mkdir()
        with tarfile.open(self.args.box_file) as box:
            box.extract("box.img", probe)
        run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(probe / "box.img"), "-F", "qcow2", str(probe / "disk")])
        # the host's CPU as it is, then without the features nested KVM may fail to give a guest
        # (QEMU aborts with "failed to set MSR 0x10a" for arch-capabilities there)
        for disabled in ((), ("arch-capabilities",)):
            start = time.monotonic()
            cpu = ",".join(["host", *(f"-{f}" for f in disabled)])
            booted = boots(["qemu-system-x86_64", "-accel", "kvm", "-cpu", cpu, "-m", "1024", "-nographic",
                            "-no-reboot", "-nic", "none", "-drive", f"file={probe / 'disk'},if=virtio"], timeout=120)
            say(f"   a VM with KVM and -cpu {cpu} {'reached' if booted else 'did not reach'} the login prompt "
                f"({time.monotonic() - start:.0f} s)")
            if booted:
                shutil.rmtree(probe)
                self.env["LABKIT_VM_CPU_DISABLE"] = ",".join(disabled)
                return "kvm"
        shutil.rmtree(probe)
        say("   QEMU software emulation")
        return "qemu"

    # -- vagrant and the VMs ------------------------------------------------------------------------
    def vagrant(self, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
        result = subprocess.run(["vagrant", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise Failed(f"vagrant {' '.join(args)} exited {result.returncode}:\n"
                         f"{tail(without_backtrace(result.stdout + result.stderr), 3000)}")
        return result

    def students(self) -> list[str]:
        return [f"student-{i:02d}" for i in range(1, self.args.students + 1)]

    def ssh(self, student: str, command: str, timeout: float = 1800, stdin: str | None = None) -> subprocess.CompletedProcess:
        argv = ["ssh", "-F", str(self.inventory), "-o", "ControlMaster=auto", "-o", f"ControlPath={self.scratch}/ssh-%h",
                "-o", "ControlPersist=yes", student, command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin)

    def labkit(self, student: str, *args: str, timeout: float = 1800) -> tuple[subprocess.CompletedProcess, float]:
        """`sudo labkit ARGS` on a VM, and how long it took there."""
        timed = 's=$(date +%s.%N); labkit "$@"; rc=$?; echo "@@took $s $(date +%s.%N)" >&2; exit $rc'
        result = self.ssh(student, "sudo " + shlex.join(["sh", "-c", timed, "labkit", *args]), timeout=timeout)
        took = 0.0
        for line in result.stderr.splitlines():
            if line.startswith("@@took "):
                start, end = line.split()[1:]
                took = float(end) - float(start)
        result.stderr = "\n".join(l for l in result.stderr.splitlines() if not l.startswith("@@took "))
        return result, took

    def snapshot(self, student: str) -> dict:
        result = self.ssh(student, "sudo /opt/labkit/venv/bin/python -", stdin=VM_SNAPSHOT, timeout=300)
        if result.returncode != 0:
            raise Failed(f"{student}: snapshot failed: {tail(result.stderr, 1000)}")
        return json.loads(result.stdout)

    def boot(self) -> None:
        start = time.monotonic()
        self.vagrant("up", "--provider", "libvirt")
        self.figures.append(Figure("workshop", f"vagrant up: {self.args.students} student VMs from the box "
                                   f"({self.env['LABKIT_VM_DRIVER']}), provisioned offline",
                                   round(time.monotonic() - start, 1), "s"))
        self.inventory.write_text(self.vagrant("ssh-config").stdout)
        for student in self.students():
            upload = self.ssh(student, "mkdir -p /tmp/labkit-workshop && cat > /tmp/labkit-workshop/support.py",
                              stdin=SNAPSHOT.read_text(), timeout=120)
            if upload.returncode != 0:
                raise Failed(f"{student}: cannot reach it over SSH with `vagrant ssh-config`: {tail(upload.stderr, 500)}")
        say(indent(self.ssh("student-01", "sudo bash -s", stdin=FACTS, timeout=120).stdout))
        doctor = self.ssh("student-01", "sudo labkit doctor", timeout=300)
        say("   labkit doctor on student-01 (exit %d):\n%s" % (doctor.returncode, indent(doctor.stdout + doctor.stderr)))

    # -- one lab's cycle ------------------------------------------------------------------------------
    def cycle(self, student: str, lab: str) -> LabCycle:
        result = LabCycle(lab)
        before = self.snapshot(student)
        try:
            run_, result.times["run"] = self.labkit(student, "run", lab)
            if run_.returncode != 0:
                result.problems.append(f"labkit run {lab} exited {run_.returncode}: {tail(run_.stderr or run_.stdout, 1500)}")
                return result
            memory = self.ssh(student, "free -m | awk '/^Mem/ {print $2 - $7}'", timeout=120).stdout.strip()
            result.notes.append(f"memory in use with the lab up: {memory} MiB")
            fresh, _ = self.labkit(student, "check", lab, "--format", "json")
            report = parse_report(fresh)
            if report is None:
                result.problems.append(f"labkit check {lab} (fresh) gave no report: {tail(fresh.stderr, 1500)}")
                return result
            exercises = [r["exercise"] for r in report["results"]]
            passing = [r["exercise"] for r in report["results"] if r["status"] == "pass"]
            if passing:
                result.problems.append(f"passing on a fresh lab: {', '.join(passing)}")
            solve_time = 0.0
            for exercise in exercises:
                solved, took = self.labkit(student, "solve", lab, exercise)
                solve_time += took
                if solved.returncode != 0:
                    result.problems.append(f"labkit solve {lab} {exercise} exited {solved.returncode}: "
                                           f"{tail(solved.stderr or solved.stdout, 800)}")
            result.times["solve"] = solve_time
            checked, result.times["check"] = self.labkit(student, "check", lab, "--format", "json")
            report = parse_report(checked)
            if report is None:
                result.problems.append(f"labkit check {lab} gave no report: {tail(checked.stderr, 1500)}")
            else:
                result.score = f"{report['score']}/{report['max_score']}"
                for r in report["results"]:
                    if r["status"] != "pass":
                        result.problems.append(f"{lab}/{r['exercise']} {r['status']} after its reference solution: "
                                               f"{r['message']}")
        finally:
            cleaned, result.times["cleanup"] = self.labkit(student, "cleanup", lab)
            if cleaned.returncode != 0:
                result.problems.append(f"labkit cleanup {lab} exited {cleaned.returncode}: {tail(cleaned.stderr, 800)}")
            after = self.snapshot(student)
            for key in before:
                if key == "modules":
                    loaded = sorted(set(after[key]) - set(before[key]))
                    gone = sorted(set(before[key]) - set(after[key]))
                    if loaded or gone:
                        result.problems.append("the VM's kernel modules changed after cleanup: " + ", ".join(
                            [f"loaded: {' '.join(loaded)}"] * bool(loaded) + [f"unloaded: {' '.join(gone)}"] * bool(gone)))
                elif before[key] != after[key]:
                    result.problems.append(f"the VM changed after cleanup: {key}\n{indent(describe_change(before[key], after[key]))}")
        return result

    # -- checkout tests inside a VM -------------------------------------------------------------------
    def run_tests(self, student: str, tests: list[str]) -> list[str]:
        """pytest of the given test files inside the VM; the problems found (none when they passed)."""
        site = Path(sysconfig.get_paths()["purelib"])
        bundle = io.BytesIO()
        skip = lambda info: None if "__pycache__" in info.name else info   # noqa: E731
        with tarfile.open(fileobj=bundle, mode="w:gz") as tar:
            tar.add(REPO / "tests", "tests", filter=skip)
            tar.add(REPO / "pyproject.toml", "pyproject.toml")     # pytest's markers and options
            for tool in TEST_TOOLS:
                tar.add(site / tool, f"site/{tool}", filter=skip)
        unpack = f"rm -rf {TESTS_DIR} && mkdir -p {TESTS_DIR} && base64 -d | tar -xz -C {TESTS_DIR}"
        copied = self.ssh(student, unpack, stdin=base64.b64encode(bundle.getvalue()).decode(), timeout=300)
        if copied.returncode != 0:
            return [f"{student}: copying the tests failed: {tail(copied.stderr, 800)}"]
        pytest = (f"cd {TESTS_DIR} && sudo env PYTHONPATH={TESTS_DIR}/site PYTHONDONTWRITEBYTECODE=1 "
                  f"/opt/labkit/venv/bin/python -m pytest -q -p no:cacheprovider " + shlex.join(tests))
        start = time.monotonic()
        result = self.ssh(student, pytest, timeout=3600)
        self.figures.append(Figure("workshop", f"pytest inside a VM: {' '.join(tests)}", round(time.monotonic() - start, 1), "s"))
        self.ssh(student, f"sudo rm -rf {TESTS_DIR}", timeout=120)
        say(indent(tail(result.stdout, 3000)))
        return [] if result.returncode == 0 else [f"pytest {' '.join(tests)} inside {student} exited {result.returncode}"]

    # -- grading -------------------------------------------------------------------------------------
    def grade(self, lab: str) -> None:
        students = self.students()
        for student in students:
            started, _ = self.labkit(student, "run", lab)
            if started.returncode != 0:
                raise Failed(f"{student}: labkit run {lab} exited {started.returncode}: {tail(started.stderr, 800)}")
        report = parse_report(self.labkit(students[0], "check", lab, "--format", "json")[0])
        for exercise in [r["exercise"] for r in report["results"]]:
            self.labkit(students[0], "solve", lab, exercise)
        out = self.scratch / "grades"
        start = time.monotonic()
        graded = subprocess.run([str(REPO / ".venv" / "bin" / "labkit"), "class", "grade", "--inventory", str(self.inventory),
                                 "--labs", lab, "--out", str(out), "--timeout", "1200"],
                                capture_output=True, text=True, timeout=3600, env=self.env)
        took = time.monotonic() - start
        self.figures.append(Figure("workshop", f"labkit class grade --labs {lab}: {len(students)} VMs over vagrant ssh-config",
                                   round(took, 1), "s"))
        try:
            if graded.returncode != 0:
                raise Failed(f"labkit class grade exited {graded.returncode}:\n{tail(graded.stdout + graded.stderr, 2000)}")
            with open(out / "gradebook.csv", newline="") as f:
                rows = {row["student"]: row for row in csv.DictReader(f)}
            say("   gradebook: " + "; ".join(f"{name} {row['score']}/{row['max_score']} ({row['state']})"
                                             for name, row in sorted(rows.items())))
            for student in students:
                row = rows.get(student)
                if row is None or row["state"] != "ok":
                    raise Failed(f"gradebook: {student} was not graded: {row}")
                want = row["max_score"] if student == students[0] else "0"
                if row["score"] != want:
                    raise Failed(f"gradebook: {student} has {row['score']} points, should have {want}: "
                                 + ("every exercise solved there" if student == students[0] else "a fresh lab there"))
        finally:
            for student in students:
                self.labkit(student, "cleanup", lab)


def parse_report(result: subprocess.CompletedProcess) -> dict | None:
    try:
        return json.loads(result.stdout)
    except ValueError:
        return None


def describe_change(before, after) -> str:
    if isinstance(before, str) and isinstance(after, str):
        old, new = set(before.splitlines()), set(after.splitlines())
        return "\n".join([f"- {l}" for l in before.splitlines() if l not in new] +
                         [f"+ {l}" for l in after.splitlines() if l not in old])
    return f"before: {before!r}\nafter:  {after!r}"


def boots(argv: list[str], timeout: float) -> bool:
    """Whether a VM started with argv (serial console on stdout) reaches a login prompt in time."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    os.set_blocking(proc.stdout.fileno(), False)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            seen += proc.stdout.read() or b""
            if b"login:" in seen:
                return True
            time.sleep(0.5)
        return False
    finally:
        proc.kill()
        proc.wait()


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise Failed(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def without_backtrace(text: str) -> str:
    """Vagrant's output without a Ruby backtrace's `\tfrom FILE:LINE:in ...` lines: an unexpected
    exception's message is on the line before them, which the tail of a backtrace of a hundred
    frames leaves out."""
    return "\n".join(line for line in (text or "").splitlines() if not line.startswith("\tfrom "))


def tail(text: str, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def indent(text: str) -> str:
    return "\n".join("      " + line for line in text.rstrip().splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/test-workshop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=2, help="student VMs to boot (default 2)")
    parser.add_argument("--driver", choices=("auto", "kvm", "qemu"), default="auto",
                        help="libvirt's accelerator: KVM, QEMU software emulation, or auto (KVM if a VM boots with it)")
    parser.add_argument("--labs", help="comma-separated labs to cycle (default: every lab)")
    parser.add_argument("--tests", help="comma-separated test files of this checkout to run with pytest inside student-01 "
                        "(e.g. tests/test_resources_mechanism.py)")
    parser.add_argument("--cpus", type=int, default=2, help="vCPUs per VM (default 2)")
    parser.add_argument("--memory", type=int, default=2048, help="MiB per VM (default 2048)")
    parser.add_argument("--box-dir", type=Path, required=True)
    parser.add_argument("--box-build-seconds", type=float, help="(from scripts/test-workshop) how long building the box took")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.students < 1:
        parser.error("--students: at least 1")
    metadata = json.loads((args.box_dir / f"{BOX}.json").read_text())
    args.box_file = Path(metadata["versions"][0]["providers"][0]["url"].removeprefix("file://"))
    from labkit.labs import discover
    labs = args.labs.split(",") if args.labs else sorted(discover())

    scratch = Path(tempfile.mkdtemp(prefix="test-workshop-", dir=args.box_dir))
    workshop = Workshop(args, scratch)
    if args.box_build_seconds:
        workshop.figures.append(Figure("workshop", "scripts/build-box", round(args.box_build_seconds, 1), "s"))
    cycles: list[LabCycle] = []
    started = time.monotonic()
    try:
        say(f"== private libvirt in {scratch}")
        workshop.start_libvirt()
        workshop.env["LABKIT_VM_DRIVER"] = workshop.choose_driver()
        say(f"== vagrant up: {args.students} students, {args.cpus} vCPUs and {args.memory} MiB each")
        workshop.boot()
        for lab in labs:
            say(f"== {lab} on student-01: run, solve every exercise, check, cleanup")
            cycle = workshop.cycle("student-01", lab)
            cycles.append(cycle)
            say(f"   {'ok' if not cycle.problems else 'FAILED'}: score {cycle.score or '-'}; "
                + ", ".join(f"{k} {v:.1f} s" for k, v in cycle.times.items()))
            for note in cycle.notes:
                say(f"   note: {note}")
            for problem in cycle.problems:
                say(f"   problem: {problem}")
            workshop.figures.append(Figure("workshop", f"first labkit run {lab} inside a VM", round(cycle.times.get("run", 0), 1),
                                           "s", note=f"check {cycle.times.get('check', 0):.1f} s"))
        if args.tests:
            say(f"== pytest on student-01: {args.tests}")
            workshop.problems += workshop.run_tests("student-01", args.tests.split(","))
        good = [c.lab for c in cycles if not c.problems]
        if good:
            say(f"== grading {args.students} VMs with labkit class grade ({good[0]})")
            workshop.grade(good[0])
        else:
            workshop.problems.append("no lab passed its cycle, so grading was not tried")
    except Exception as exc:   # noqa: BLE001 - whatever went wrong, the VMs are destroyed below
        if not isinstance(exc, Failed):
            traceback.print_exc()
        workshop.problems.append(str(exc))
        say(f"   FAILED: {exc}")
    finally:
        say("== vagrant destroy")
        try:
            start = time.monotonic()
            if (scratch / "vagrant-machines").exists():
                workshop.vagrant("destroy", "--force")
            workshop.figures.append(Figure("workshop", "vagrant destroy", round(time.monotonic() - start, 1), "s"))
        except Failed as exc:
            workshop.problems.append(str(exc))
        workshop.stop_libvirt()
        shutil.rmtree(scratch, ignore_errors=True)
    workshop.figures.append(Figure("workshop", "the whole test (without building the box)", round(time.monotonic() - started), "s"))

    problems = workshop.problems + [p for c in cycles for p in c.problems]
    say(f"== {'passed' if not problems else f'FAILED: {len(problems)} problems'}")
    for problem in problems:
        say(f"   - {problem}")
    print_table(workshop.figures)
    if args.json:
        args.json.write_text(json.dumps([f.__dict__ for f in workshop.figures], indent=2) + "\n")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
