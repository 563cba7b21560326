"""`labkit class ...`: a whole class of student machines: grade, prepare, status over SSH; credentials."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from labkit.errors import LabkitError

app = typer.Typer(help="A whole class of student machines: credentials, prepare a lab, status, grade (over SSH).",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})


INVENTORY_HELP = ("The machines: YAML or CSV (name, host, port, user, key), `vagrant ssh-config` output as is, "
                  "or an Ansible inventory (INI, YAML, or `ansible-inventory --list` JSON).")
GROUP_HELP = "Ansible inventories: only the hosts of this group (default: every host)."


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _lab_ids(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    ids = [v.strip() for value in values for v in value.split(",") if v.strip()]
    return list(dict.fromkeys(ids))


@app.command()
def grade(
    inventory: Path = typer.Option(..., "--inventory", "-i", metavar="FILE", help=INVENTORY_HELP),
    group: Optional[str] = typer.Option(None, "--group", "-g", metavar="GROUP", help=GROUP_HELP),
    labs: Optional[List[str]] = typer.Option(None, "--labs", "-l", metavar="LAB[,LAB...]",
                                             help="Labs to grade (repeat or comma-separate); default: every lab here."),
    parallel: int = typer.Option(8, "--parallel", "-j", min=1, max=256, help="Machines graded at the same time."),
    out: Path = typer.Option(Path("grades"), "--out", "-o", metavar="DIR",
                             help="Output directory (rewritten on every run, but for its ledger of passes seen live, "
                                  "DIR/passes-seen.jsonl, which only grows; host keys are pinned in DIR/known_hosts)."),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="Seconds one lab's checks may take on one machine."),
    retries: int = typer.Option(2, "--retries", min=0, max=10,
                                help="Further attempts, with exponential backoff, when a machine cannot be reached."),
    connect_timeout: int = typer.Option(10, "--connect-timeout", min=1, max=300, help="Seconds to wait for an SSH connection."),
    remote_labkit: str = typer.Option("labkit", "--labkit", metavar="COMMAND",
                                      help="The labkit command on the student machines."),
    reveal: bool = typer.Option(False, "--reveal-answers",
                                help="After the deadline: the reports also carry the right answer of each failed "
                                     "exercise (`labkit check --reveal-answers` on every machine)."),
    accept_recorded: bool = typer.Option(False, "--accept-recorded",
                                         help="Also count the passes a machine reports as recorded earlier (a file "
                                              "on the student's machine, which its root can write). Without it they "
                                              "are shown, not counted, unless an earlier grading run into --out saw "
                                              "them pass live (OUT/passes-seen.jsonl)."),
):
    """Run `labkit check LAB --format json` as root on every student machine and write the
    gradebook (CSV), per-student Gradescope results.json and JUnit XML, the raw JSON and an HTML
    class report. A pass counts when seen live, now or by an earlier run into the same --out (its
    ledger, passes-seen.jsonl); a pass only recorded on the machine counts with --accept-recorded.
    Exit code 0 when every machine was graded, 1 when some could not be (they are in the results
    with the reason), 2 on a usage error."""
    from labkit.classroom import grade as grading_run, inventory as inv, outputs, remote
    from labkit.classroom.seen import Ledger
    from labkit.labs import discover, get_lab

    machines = inv.load(inventory, group)
    lab_ids = _lab_ids(labs) or sorted(discover())
    if not lab_ids:
        raise LabkitError("--labs: no labs found on this machine; name the labs to grade")
    chosen = [get_lab(lab_id) for lab_id in lab_ids]
    if not remote_labkit.strip() or "\n" in remote_labkit:
        raise LabkitError("--labkit: expected a command name or path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabkitError(f"--out {out}: cannot create the directory: {exc.strerror or exc}")
    settings = remote.Settings(known_hosts=(out / "known_hosts").resolve(), timeout=timeout,
                               connect_timeout=connect_timeout, retries=retries, labkit=remote_labkit,
                               reveal_answers=reveal)
    ledger = Ledger.load(out)
    _say(f"grading {len(machines)} machines, labs {', '.join(lab_ids)}, {parallel} at a time; "
         f"{len(ledger.sightings)} passes seen by earlier runs in {ledger.path}"
         + ("; recorded passes counted (--accept-recorded)" if accept_recorded else ""))

    def progress(student):
        score, max_score = result_totals(student)
        line = f"  {student.name}: {student.state}"
        if student.problems:
            line += " (" + "; ".join(student.problems) + ")"
        uncounted = partial(student).uncounted(student)
        if uncounted:
            line += f", {len(uncounted)} recorded passes not counted ({' '.join(uncounted)})"
        _say(line + f", {score}/{max_score} points")

    def partial(student):
        return grading_run.ClassResult(chosen, [student], "", ledger=ledger, accept_recorded=accept_recorded)

    def result_totals(student):
        return partial(student).totals(student)

    result = grading_run.grade_class(machines, chosen, settings, parallel=parallel, progress=progress,
                                     ledger=ledger, accept_recorded=accept_recorded)
    try:
        files = outputs.write_all(result, out)
    except OSError as exc:
        raise LabkitError(f"--out {out}: cannot write the results: {exc}")
    graded = sum(1 for s in result.students if s.state == remote.OK)
    _say(f"{graded} of {len(result.students)} machines graded in {result.seconds:.1f} s; "
         f"{len(ledger.added)} new passes in the ledger; gradebook {files['gradebook']}, report {files['report']}")
    raise typer.Exit(0 if graded == len(result.students) else 1)


@app.command()
def credentials(
    students: Optional[int] = typer.Option(None, "--students", "-n", min=1, max=500,
                                           help="How many students (student-01 ...); default: one per --names line."),
    names: Optional[Path] = typer.Option(None, "--names", metavar="FILE",
                                         help="The students, one per line, in the order of their machines."),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="Where to write them (never overwritten)."),
    user: str = typer.Option("student", "--user", help="The student's account on their machine."),
    host: str = typer.Option("", "--host", metavar="ADDRESS",
                             help="Where students reach their machines: the roster says ADDRESS and port "
                                  "BASE+NN (the Vagrantfile's forwarded SSH ports)."),
    base_port: int = typer.Option(22000, "--base-port", min=1, max=65000, help="With --host: student NN's port is BASE+NN."),
    cloud_init: bool = typer.Option(False, "--cloud-init",
                                    help="Also one cloud-init user-data (and NoCloud meta-data) per student, in "
                                         "DIR/cloud-init/student-NN/, for machines from the cloud image."),
    admin: str = typer.Option("instructor", "--admin", metavar="USER",
                              help="With --cloud-init: the instructor's account (key only, passwordless sudo)."),
    admin_key: Optional[Path] = typer.Option(None, "--admin-key", metavar="FILE",
                                             help="With --cloud-init: the instructor's SSH public key (default: a new "
                                                  "key pair, DIR/keys/instructor)."),
    keep_solutions: bool = typer.Option(False, "--keep-solutions",
                                        help="With --cloud-init: leave the labs' reference solutions on the machines."),
):
    """Make every student's SSH key pair (ed25519) and sudo password, and the roster: which student
    has which machine, account and key. The Vagrantfile (LABKIT_CREDENTIALS=DIR) and
    deploy/ansible/workshop.yml (DIR/host_vars) put them on the machines; with --cloud-init,
    cloud-init does on machines booted from the cloud image (scripts/build-box --cloud)."""
    from labkit.classroom import credentials as creds
    from labkit.classroom.inventory import HOST_RE, USER_RE

    who = creds.read_names(names) if names is not None else None
    if students is None:
        if not who:
            raise LabkitError("--students N or --names FILE: how many students?")
        students = len(who)
    if not USER_RE.match(user) or user == "root":
        raise LabkitError(f"--user: {user!r} is not a user name for a student")
    if host and not HOST_RE.match(host):
        raise LabkitError(f"--host: {host!r} is not a host name or address")
    if host and base_port + students > 65535:
        raise LabkitError(f"--base-port: {base_port} + {students} students is beyond port 65535")
    if (admin_key is not None or admin != "instructor" or keep_solutions) and not cloud_init:
        raise LabkitError("--admin, --admin-key and --keep-solutions go with --cloud-init")
    if not USER_RE.match(admin) or admin in ("root", user):
        raise LabkitError(f"--admin: {admin!r} is not a user name for the instructor (nor the student's {user!r})")
    admin_public = None
    if admin_key is not None:
        try:
            admin_public = admin_key.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise LabkitError(f"--admin-key {admin_key}: cannot read it: {exc}")
        if len(admin_public.splitlines()) != 1 or not admin_public.startswith(("ssh-", "ecdsa-", "sk-")):
            raise LabkitError(f"--admin-key {admin_key}: not one OpenSSH public key line")
    made = creds.make(out, students, user=user, host=host, base_port=base_port, names=who, cloud_init=cloud_init,
                      admin=admin, admin_key=admin_public, keep_solutions=keep_solutions)
    _say(f"{len(made)} students: keys in {out / 'keys'}, roster {out / 'roster.csv'} (private: it holds the sudo "
         f"passwords), for the machines {out / 'credentials.json'} and {out / 'host_vars'}"
         + (f"; cloud-init user-data in {out / 'cloud-init'}" if cloud_init else ""))


def _machines_and_settings(inventory: Path, group: str | None, out: Path, timeout: float, retries: int,
                           connect_timeout: int, remote_labkit: str):
    from labkit.classroom import inventory as inv, remote

    machines = inv.load(inventory, group)
    if not remote_labkit.strip() or "\n" in remote_labkit:
        raise LabkitError("--labkit: expected a command name or path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabkitError(f"--out {out}: cannot create the directory: {exc.strerror or exc}")
    settings = remote.Settings(known_hosts=(out / "known_hosts").resolve(), timeout=timeout,
                               connect_timeout=connect_timeout, retries=retries, labkit=remote_labkit)
    return machines, settings


OUT_HELP = "The grading directory: host keys are pinned in DIR/known_hosts, as by `labkit class grade`."


@app.command()
def prepare(
    lab: str = typer.Argument(..., metavar="LAB", help="The lab to start on every machine."),
    inventory: Path = typer.Option(..., "--inventory", "-i", metavar="FILE", help=INVENTORY_HELP),
    group: Optional[str] = typer.Option(None, "--group", "-g", metavar="GROUP", help=GROUP_HELP),
    parallel: int = typer.Option(8, "--parallel", "-j", min=1, max=256, help="Machines at the same time."),
    out: Path = typer.Option(Path("grades"), "--out", "-o", metavar="DIR", help=OUT_HELP),
    timeout: float = typer.Option(600.0, "--timeout", min=1.0, help="Seconds `labkit run` may take on one machine."),
    retries: int = typer.Option(2, "--retries", min=0, max=10, help="Further attempts when a machine cannot be reached."),
    connect_timeout: int = typer.Option(10, "--connect-timeout", min=1, max=300, help="Seconds to wait for an SSH connection."),
    remote_labkit: str = typer.Option("labkit", "--labkit", metavar="COMMAND", help="The labkit command on the machines."),
):
    """Start LAB on every machine (`labkit run LAB` as root over SSH; a lab that is up stays up).
    Exit code 0 when it is up everywhere, 1 when some machines failed (listed with the reason)."""
    from labkit.classroom import operations, remote
    from labkit.labs import get_lab

    chosen = get_lab(lab)
    machines, settings = _machines_and_settings(inventory, group, out, timeout, retries, connect_timeout, remote_labkit)
    _say(f"starting {chosen.id} on {len(machines)} machines, {parallel} at a time")
    done = [0]

    def progress(machine, outcome):
        done[0] += 1
        what = "up" if outcome.outcome == remote.OK else f"{outcome.outcome}: {outcome.reason}"
        _say(f"  [{done[0]}/{len(machines)}] {machine.name}: {what} ({outcome.seconds:.1f} s)")

    outcomes = operations.prepare(machines, chosen, settings, parallel=parallel, progress=progress)
    failed = [(m, o) for m, o in zip(machines, outcomes) if o.outcome != remote.OK]
    _say(f"{chosen.id} is up on {len(machines) - len(failed)} of {len(machines)} machines"
         + ("; not on: " + ", ".join(m.name for m, _ in failed) if failed else ""))
    raise typer.Exit(0 if not failed else 1)


@app.command()
def status(
    inventory: Path = typer.Option(..., "--inventory", "-i", metavar="FILE", help=INVENTORY_HELP),
    group: Optional[str] = typer.Option(None, "--group", "-g", metavar="GROUP", help=GROUP_HELP),
    labs: Optional[List[str]] = typer.Option(None, "--labs", "-l", metavar="LAB[,LAB...]",
                                             help="Labs to report on (repeat or comma-separate); default: every lab here."),
    parallel: int = typer.Option(8, "--parallel", "-j", min=1, max=256, help="Machines at the same time."),
    out: Path = typer.Option(Path("grades"), "--out", "-o", metavar="DIR", help=OUT_HELP),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="Seconds one command may take on one machine."),
    retries: int = typer.Option(2, "--retries", min=0, max=10, help="Further attempts when a machine cannot be reached."),
    connect_timeout: int = typer.Option(10, "--connect-timeout", min=1, max=300, help="Seconds to wait for an SSH connection."),
    remote_labkit: str = typer.Option("labkit", "--labkit", metavar="COMMAND", help="The labkit command on the machines."),
):
    """Every machine's labkit version (a warning where it differs from this one's) and, per lab,
    whether it runs and how many exercises pass now. One line per machine on stdout; exit code 0
    when every machine answered, 1 otherwise."""
    from labkit import __version__
    from labkit.classroom import operations, remote
    from labkit.labs import discover, get_lab

    lab_ids = _lab_ids(labs) or sorted(discover())
    chosen = [get_lab(lab_id) for lab_id in lab_ids]
    machines, settings = _machines_and_settings(inventory, group, out, timeout, retries, connect_timeout, remote_labkit)
    _say(f"asking {len(machines)} machines (labkit {__version__} here), labs {', '.join(lab_ids) or '(none)'}, "
         f"{parallel} at a time")
    done = [0]

    def progress(machine, result):
        done[0] += 1
        _say(f"  [{done[0]}/{len(machines)}] {machine.name}: {result.outcome}")

    results = operations.status(machines, chosen, settings, parallel=parallel, progress=progress)
    for result in results:
        sys.stdout.write(result.describe() + "\n")
    answered = [r for r in results if r.outcome == remote.OK]
    skewed = [r.machine.name for r in answered if r.skew]
    running = {lab.id: sum(1 for r in answered for s in r.labs if s.lab == lab.id and s.running) for lab in chosen}
    _say(f"{len(answered)} of {len(results)} machines answered"
         + (f"; labkit version differs from {__version__} on: {', '.join(skewed)}" if skewed else "; same labkit version everywhere")
         + "".join(f"; {lab} running on {n}" for lab, n in running.items()))
    raise typer.Exit(0 if len(answered) == len(results) else 1)
