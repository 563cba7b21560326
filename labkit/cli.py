"""The `labkit` command line.

Exit codes: 0 all passed / ok, 1 a check failed, 2 usage or environment error.
Lab families (kube-proxy, gc, ns, mounts, numa, resources, ...) add their own sub-commands from their
mechanism package; they are registered at the bottom of this file.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperCommand, TyperGroup

from labkit import __version__, cliopts
from labkit.errors import LabkitError

# -- lab families: their commands are imported when used, so `labkit --help` and completion start fast
# name: (module, attribute: a typer app or one command function, the short help `labkit --help` lists;
# tests/test_cli.py holds it to the family's own)
FAMILIES = {
    "kube-proxy": ("labkit.kubeproxy.cli", "app", "kube-proxy's iptables mode: render the rules a node gets, and more."),
    "trace": ("labkit.netfilter.cli", "trace", "Follow a packet through a node's iptables rules (nat, filter) as the kernel would."),
    "gc": ("labkit.gc.cli", "app", "Garbage collection: play scenarios (`run`), follow the GC's decisions (`log`), "
                                   "draw the owner graph (`graph`)."),
    "ns": ("labkit.namespaces.cli", "app", "Namespaces: why one is still Terminating (`explain`), the namespace "
                                           "controller's decisions (`log`), what changed between releases (`versions`)."),
    "apiserver": ("labkit.apiserver.cli", "apiserver", "Run labkit's embedded Kubernetes API server (with its controllers) until Ctrl-C."),
    "mounts": ("labkit.mounts.cli", "app", "Mount propagation: Pods on the lab's node (apply, get, exec, delete), "
                                           "scenarios on a fresh node (play), and who sees which mount (matrix, graph)."),
    "numa": ("labkit.numa.cli", "app", "kubelet's Topology, CPU and Memory Managers, reconstructed."),
    "resources": ("labkit.resources.cli", "app", "Pod resources as cgroups: QoS, CPU shares/weight and quota, "
                                                 "memory limits, OOM, eviction."),
    "requests": ("labkit.requests.cli", "app", "The API server's request pipeline: `explain` a request stage by "
                                               "stage; serve an admission `webhook` you wrote."),
    "scheduler": ("labkit.scheduler.cli", "app", "kube-scheduler v1.34.1, reconstructed: play scheduling cases (`play`), and `explain` one."),
    "devices": ("labkit.devices.cli", "app", "kubelet's device manager v1.34.1, reconstructed: play device-plugin cases (`play`), run a plugin against it (`try`), read its checkpoint (`checkpoint`), labkit's reference plugin (`plugin serve`)."),
    "class": ("labkit.classroom.cli", "app", "A whole class of student machines: credentials, prepare a lab, status, grade (over SSH)."),
}


def load_family(name: str):
    """The click command of a family (imports its module)."""
    import importlib

    import typer.main

    module, attribute, _help = FAMILIES[name]
    found = getattr(importlib.import_module(module), attribute)
    if isinstance(found, typer.Typer):
        found._add_completion = False          # completion is the top level's (labkit --install-completion)
        command = typer.main.get_group(found)   # a group even with one command (`labkit class grade`)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(found)
        command = typer.main.get_command(single)
    command.name = name
    return command


def _conventional_help() -> None:
    """Help as command lines have always read: `LAB [EXERCISE]` in the usage line (typer writes a
    required argument as `{LAB}`), no type after an argument, and option values named as click
    names them (TEXT, INTEGER, PATH) or by their metavar. Display methods of typer's parameter
    classes are replaced; parsing is untouched.
    typer is held below 0.29 (pyproject.toml), whose parameters import pydantic on every start."""
    from typer._click.types import ParamType
    from typer.core import TyperArgument, TyperOption

    original = TyperArgument.make_metavar

    def make_metavar(self, ctx, *, usage: bool = False) -> str:
        if not usage:
            return original(self, ctx, usage=False)
        name = self.metavar if self.metavar is not None else (self.name or "").upper()
        if name.startswith("["):          # a metavar that writes its own brackets
            return name
        name += "..." if self.nargs != 1 and not name.endswith("...") else ""
        return name if self.required else f"[{name}]"

    def option_metavar(self, ctx) -> str:
        shown = option_original(self, ctx)
        if shown.startswith("<") and ">" in shown:
            bare, rest = shown[1:].split(">", 1)
            shown = _CLICK_TYPE_NAMES.get(bare, bare.upper()) + rest
        return shown

    def argument_type(self, param, ctx):
        # the argument table shows no type after an argument: its name says it
        return "" if isinstance(param, TyperArgument) else type_original(self, param, ctx)

    option_original, type_original = TyperOption.make_metavar, ParamType.get_metavar
    TyperArgument.make_metavar = make_metavar
    TyperOption.make_metavar = option_metavar
    ParamType.get_metavar = argument_type

    # typer's rich help joins the lines of a docstring's first paragraph only: the others kept the
    # source's line breaks, and wrapped again at the terminal's width they broke off mid-sentence
    for cls in (TyperCommand, TyperGroup):
        cls.format_help = _filled(cls.format_help)


def _filled(format_help):
    def fill(self, ctx, formatter):
        self.help = fill_paragraphs(self.help)
        if isinstance(self, TyperGroup):
            # a group's table of commands shows each one's first paragraph, with its line breaks
            for name in self.list_commands(ctx):
                command = self.get_command(ctx, name)
                if command is not None:
                    command.help = fill_paragraphs(command.help)
        return format_help(self, ctx, formatter)
    return fill


def fill_paragraphs(text: str | None) -> str | None:
    """A help text whose paragraphs are each one line, as terminals wrap them; a paragraph that
    begins with click's `\\b` keeps its lines (examples, tables)."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
                       for p in paragraphs)


_CLICK_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "file": "PATH"}
_conventional_help()


class LabkitGroup(TyperGroup):
    """The top-level group: the core commands, and the families loaded on first use. Listings
    (help, completion of the command name) see a stand-in with the family's short help."""

    def list_commands(self, ctx):
        return list(super().list_commands(ctx)) + [n for n in FAMILIES if n not in self.commands]

    def get_command(self, ctx, name):
        found = super().get_command(ctx, name)
        if found is None and name in FAMILIES:
            found = TyperCommand(name, help=FAMILIES[name][2], callback=lambda: None)
        return found

    def resolve_command(self, ctx, args):
        if args and args[0] in FAMILIES and args[0] not in self.commands:
            self.add_command(load_family(args[0]), args[0])
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=LabkitGroup,
    help="Kubernetes-internals labs on real Linux parts. Start with `labkit list` and `labkit run LAB`.",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


class _Console:
    """rich's Console, made when first used (completion and help never import it from here)."""

    def __init__(self, **options):
        self._options, self._console = options, None

    def __getattr__(self, name):
        if self._console is None:
            from rich.console import Console
            self._console = Console(**self._options)
        return getattr(self._console, name)


out = _Console()
err = _Console(stderr=True)


def get_lab(lab_id: str):
    """labkit.labs.get_lab, imported when a command needs it (help and completion start faster)."""
    from labkit.labs import get_lab as load
    return load(lab_id)


def fail(message: str, code: int = 2):
    sys.stderr.write(f"labkit: {message}\n")
    raise typer.Exit(code)


def _say(message: str) -> None:
    err.print(message, highlight=False, markup=False, soft_wrap=True)   # never cut a path in two


def _markdown(text: str) -> None:
    """Rendered in a terminal; the Markdown source as is when piped or redirected."""
    if out.is_terminal:
        from rich.markdown import Markdown
        out.print(Markdown(text))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


# -- completion: labs, exercises and hosts from what is on this machine --------------------------


def complete_lab(incomplete: str) -> list[str]:
    from labkit.labs import discover
    try:
        return [lab_id for lab_id in discover() if lab_id.startswith(incomplete)]
    except Exception:       # completion never prints a traceback into the shell
        return []


def complete_exercise(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    try:
        lab = get_lab(ctx.params.get("lab_id") or "")
    except Exception:
        return []
    return [(ex.id, ex.title) for ex in lab.exercises if ex.id.startswith(incomplete)]


def complete_host(ctx: typer.Context, incomplete: str) -> list[str]:
    """The hosts of a running lab (needs root to read its state: else none)."""
    from labkit.state import LabEnv, LabState
    try:
        lab = get_lab(ctx.params.get("lab_id") or "")
        hosts = getattr(lab.environment_module(), "hosts", None)
        names = list(hosts(LabEnv(lab, LabState(lab.id)))) if callable(hosts) else []
    except Exception:
        return []
    return [name for name in names if name.startswith(incomplete)]


def version_callback(value: bool):
    if value:
        out.print(f"labkit {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print the version and exit."),
):
    """Kubernetes-internals labs on real Linux parts."""


@app.command("list")
def list_labs(output: Optional[str] = cliopts.output_option(("table", "json", "yaml", "name"), "table")):
    """Labs on this machine and your progress in each."""
    from labkit import runner

    fmt, _ = cliopts.resolve_output(output, ("table", "json", "yaml", "name"), "table")
    rows = runner.listing()
    if fmt != "table":
        cliopts.print_data([row.__dict__ for row in rows], fmt, name=lambda row: row["id"])
        return
    from rich.table import Table
    # lab and status whole on one line each; the title takes what is left of the width
    table = Table(show_header=True, box=None, pad_edge=False)
    table.add_column("lab", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("title")
    for row in rows:
        table.add_row(row.id, row.status if not row.error else f"{row.status}: {row.error}", row.title)
    out.print(table)
    if not rows:
        out.print("no labs found")


def _points(n: int) -> str:
    return f"{n} point{'' if n == 1 else 's'}"


def _print_exercises(lab) -> None:
    from labkit.exercises import answer_path

    lines = ["## Exercises", ""]
    for i, ex in enumerate(lab.exercises, start=1):
        lines.append(f"{i}. **{ex.id}** — {ex.title} ({_points(ex.points)})")
        if ex.answer:
            lines.append(f"   answer file: `{answer_path(lab.id, ex.id)}`")
    lines += ["", f"Read one with `labkit show {lab.id} EXERCISE`, check with `labkit check {lab.id}`, "
              f"get a hint with `labkit hint {lab.id} EXERCISE`."]
    _markdown("\n".join(lines))


@app.command()
def run(lab_id: str = typer.Argument(..., metavar="LAB", help="Lab to start, e.g. kube-proxy.", autocompletion=complete_lab),
        kubeconfig: Optional[Path] = typer.Option(None, "--kubeconfig", help="Labs on a Kubernetes API (gc): use "
                                                  "this real cluster instead of labkit's embedded API server."),
        context: Optional[str] = typer.Option(None, "--context", help="With --kubeconfig: the context (default: current).")):
    """Build the lab's environment (idempotent) and print its instructions."""
    from labkit import runner
    lab = get_lab(lab_id)
    if context and not kubeconfig:
        fail("--context needs --kubeconfig")
    if kubeconfig and not kubeconfig.is_file():
        fail(f"--kubeconfig: {kubeconfig}: no such file")
    options = {"kubeconfig": str(kubeconfig.resolve()), "context": context} if kubeconfig else None
    from labkit import progress
    with progress.shown(err, f"building lab {lab.id}") as shown:
        env, built = runner.run(lab, say=_say, options=options)
        if built:
            shown["summary"] = f"lab {lab.id} is up: built in {{seconds:.1f}} s ({{steps}} steps)"
    if not built:
        _say(f"lab {lab.id} is already running")
    _markdown(lab.instructions)
    _print_exercises(lab)
    access = getattr(lab.environment_module(), "access", None)
    if callable(access):
        _markdown(access(env))


@app.command()
def show(
    lab_id: str = typer.Argument(..., metavar="LAB", autocompletion=complete_lab),
    exercise: Optional[str] = typer.Argument(None, metavar="EXERCISE", autocompletion=complete_exercise,
                                             help="Exercise id or number (as listed); all when omitted."),
    output: Optional[str] = cliopts.output_option(("markdown", "json", "yaml"), "markdown"),
):
    """Print the instructions of a lab, or the prompt of one exercise."""
    from labkit.exercises import answer_path

    fmt, _ = cliopts.resolve_output(output, ("markdown", "json", "yaml"), "markdown")
    lab = get_lab(lab_id)
    if fmt != "markdown":
        def described(ex, whole: bool) -> dict:
            item = {"id": ex.id, "title": ex.title, "points": ex.points}
            if whole:
                item["prompt"] = ex.prompt
            if ex.answer:
                item.update(answer=ex.answer, answerFile=str(answer_path(lab.id, ex.id)))
            if ex.solved:
                item["solved"] = {part: list(lines) for part, lines in ex.solved.items()}
            return item
        data = described(lab.exercise(exercise), True) if exercise is not None else \
            {"id": lab.id, "title": lab.title, "summary": lab.summary,
             "exercises": [described(ex, False) for ex in lab.exercises]}
        cliopts.print_data(data, fmt)
        return
    if exercise is None:
        _markdown(lab.instructions)
        _print_exercises(lab)
        return
    ex = lab.exercise(exercise)
    text = f"# {ex.title} ({_points(ex.points)})\n\n{ex.prompt}"
    if ex.answer:
        text += f"\n\n**Answer file** ({ex.answer}):\n\n    {answer_path(lab.id, ex.id)}\n"
    if ex.solved:
        text += "\n\n**Solved when** (what `labkit check` judges):\n\n" + "".join(f"- {line}\n" for line in ex.solved["holds"])
        text += "\n**and these stay as they were:**\n\n" + "".join(f"- {line}\n" for line in ex.solved["unchanged"])
    _markdown(text)




CHECK_FORMATS = ("table", "json", "yaml", "junit", "gradescope")    # labkit.grading.FORMATS


@app.command()
def check(
    lab_id: str = typer.Argument(..., metavar="LAB", autocompletion=complete_lab),
    exercise: Optional[str] = typer.Argument(None, metavar="EXERCISE", help="Check only this exercise.",
                                             autocompletion=complete_exercise),
    output: Optional[str] = cliopts.output_option(CHECK_FORMATS, "table"),
    output_file: Optional[Path] = cliopts.output_file_option(),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", hidden=True, help="Old spelling of -o."),
    reveal: bool = typer.Option(False, "--reveal-answers",
                                help="For instructors after the deadline: also show the right answer of each failed "
                                     "exercise (as do `reveal_answers: true` in lab.yaml and LABKIT_REVEAL_ANSWERS=1)."),
):
    """Run the lab's checks. Exit code 0 only when every check passes now (exercises that passed
    before keep their points in the score)."""
    from labkit import grading, runner
    from labkit.exercises import reveal_answers

    fmt, output_file = cliopts.resolve_output(output, CHECK_FORMATS, "table", legacy_format=fmt, output_file=output_file)
    lab = get_lab(lab_id)
    results = runner.check(lab, exercise, say=_say)
    rep = grading.report(lab, results, reveal=reveal or reveal_answers(lab))
    if fmt == "table":
        if output_file:
            with open(output_file, "w") as f:
                from rich.console import Console
                grading.render_text(rep, Console(file=f, width=100))
        else:
            grading.render_text(rep, out)
    else:
        text = grading.render(rep, fmt)
        if output_file:
            tmp = output_file.with_name(output_file.name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, output_file)
            _say(f"{rep['passed']} of {rep['total']} passed; report written to {output_file}")
        else:
            sys.stdout.write(text)
    raise typer.Exit(0 if grading.all_passed(results) else 1)


@app.command()
def hint(lab_id: str = typer.Argument(..., metavar="LAB", autocompletion=complete_lab), exercise: str = typer.Argument(..., metavar="EXERCISE", autocompletion=complete_exercise)):
    """Show the next hint for an exercise (labkit remembers which you have seen)."""
    from labkit import runner
    lab = get_lab(lab_id)
    number, total, text = runner.next_hint(lab, exercise)
    if text is None:
        out.print(f"{exercise} has no hints")
        return
    suffix = " (that was the last one)" if number == total else ""
    out.print(f"[bold]hint {number} of {total}[/]{suffix}")
    _markdown(text)


@app.command()
def solve(lab_id: str = typer.Argument(..., metavar="LAB", autocompletion=complete_lab), exercise: str = typer.Argument(..., metavar="EXERCISE", autocompletion=complete_exercise),
          mistake: Optional[str] = typer.Option(
              None, "--mistake", metavar="NAME",
              help="Apply one of the exercise's common wrong solutions instead (see what its check says about it).")):
    """Apply the reference solution of an exercise (for instructors and tests)."""
    from labkit import runner
    lab = get_lab(lab_id)
    if mistake:
        runner.apply_mistake(lab, exercise, mistake)
        _say(f"applied the wrong solution {mistake!r} of {lab.id}/{exercise}")
        return
    runner.solve(lab, exercise)
    _say(f"applied the reference solution of {lab.id}/{exercise}")


@app.command()
def reset(lab_id: str = typer.Argument(..., metavar="LAB", autocompletion=complete_lab),
          exercise: Optional[str] = typer.Argument(None, metavar="EXERCISE", autocompletion=complete_exercise,
                                                   help="Only this exercise's part of the lab (id or number)."),
          yes: bool = typer.Option(False, "--yes", "-y", help="Revert your changes without asking."),
          forget_prediction: bool = typer.Option(
              False, "--forget-prediction",
              help="Also forget the prediction labkit kept when a tool showed the outcome of the prediction exercise "
                   "(or, without EXERCISE, of every prediction exercise of the lab): its tools withhold the outcome "
                   "again until you record an answer, which is then graded. The grade report shows that it was "
                   "forgotten.")):
    """Build the lab (or one exercise's part of it) fresh. Your answer files and the exercises
    you passed are kept. If the reset would revert work of yours, it lists it and asks first
    (with --yes it lists it and reverts it without asking).

    A prediction exercise's answer that labkit kept when one of its tools showed the outcome is
    kept too, by every reset of the exercise or of the lab: the check goes on grading it (what
    was shown cannot be unseen). Only --forget-prediction forgets it."""
    from labkit import runner
    lab = get_lab(lab_id)
    at_risk = runner.work_at_risk(lab, exercise)
    if forget_prediction:
        at_risk += [f"your {ex} answer as labkit kept it when a tool showed the outcome (--forget-prediction: "
                    "forgotten, and the grade report says so)" for ex in runner.kept_predictions(lab, exercise)]
    if at_risk and not yes:
        what = f"exercise {lab.exercise(exercise).id} of lab {lab.id}" if exercise else f"the whole lab {lab.id}"
        listing = "".join(f"\n  - {item}" for item in at_risk)
        if not sys.stdin.isatty():
            fail(f"resetting {what} would revert:{listing}\nrun `labkit reset {lab_id}"
                 f"{' ' + exercise if exercise else ''}{' --forget-prediction' if forget_prediction else ''} --yes` "
                 "to revert it")
        typer.echo(f"Resetting {what} reverts:{listing}", err=True)
        if not typer.confirm("Revert it?", default=False, err=True):
            fail("nothing was reset")
    elif at_risk:        # --yes reverts without asking, and still says what
        what = f"exercise {lab.exercise(exercise).id} of lab {lab.id}" if exercise else f"the whole lab {lab.id}"
        typer.echo(f"Resetting {what} reverts:" + "".join(f"\n  - {item}" for item in at_risk), err=True)
    from labkit import progress
    with progress.shown(err, f"resetting lab {lab.id}") as shown:
        runner.reset(lab, say=_say, exercise_id=exercise, forget_prediction=forget_prediction)
        shown["summary"] = "done in {seconds:.1f} s"


@app.command()
def cleanup(
    lab_id: Optional[str] = typer.Argument(None, metavar="LAB", autocompletion=complete_lab),
    all_labs: bool = typer.Option(False, "--all", help="Clean up every lab that has state on this machine."),
):
    """Remove everything labkit created for a lab (or all labs), also after a crash."""
    from labkit import runner
    if bool(lab_id) == all_labs:
        fail("give a LAB or --all")
    results = runner.cleanup_all(say=_say) if all_labs else {lab_id: runner.cleanup(lab_id, say=_say)}
    problems = [f"{lab}: {p}" for lab, ps in results.items() for p in ps]
    if problems:
        fail("cleanup left things behind:\n  " + "\n  ".join(problems))
    _say("cleaned up: " + (", ".join(results) or "nothing to clean"))


@app.command()
def doctor(output: Optional[str] = cliopts.output_option(("table", "json", "yaml"), "table"),
           as_json: bool = typer.Option(False, "--json", hidden=True, help="Old spelling of -o json.")):
    """Check the prerequisites of every lab and say how to fix what is missing."""
    from labkit import doctor as doc

    fmt, _ = cliopts.resolve_output(output, ("table", "json", "yaml"), "table", legacy_json=as_json)
    findings = doc.run_checks()
    if fmt != "table":
        cliopts.print_data([f.__dict__ for f in findings], fmt)
    else:
        mark = {"ok": "[green]ok[/]  ", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]", "skipped": "[dim]--[/]  "}
        from rich.markup import escape
        for f in findings:
            out.print(f"{mark[f.status]} {f.name}: {escape(f.detail)}")
            if f.fix:
                out.print(f"      fix: {escape(f.fix)}")
    raise typer.Exit(2 if doc.failures(findings) else 0)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def shell(
    ctx: typer.Context,
    lab_id: str = typer.Argument(..., metavar="LAB", autocompletion=complete_lab),
    host: str = typer.Argument(..., metavar="HOST", help="A host of the lab (see `labkit run LAB`).",
                          autocompletion=complete_host),
):
    """Open a shell inside a lab host; `labkit shell LAB HOST -- CMD...` runs one command."""
    from labkit import runner
    from labkit import shell as lab_shell
    from labkit.state import LabEnv, LabState

    lab = get_lab(lab_id)
    env = LabEnv(lab, LabState(lab.id))
    if not runner.lab_is_up(env):
        fail(f"lab {lab.id} is not running: start it with `labkit run {lab.id}`")
    lab_shell.run(env, host, list(ctx.args) or None)


def full_command():
    """The whole command tree, every family loaded (for tests and documentation)."""
    import typer.main

    root = typer.main.get_command(app)
    for name in FAMILIES:
        if name not in root.commands:
            root.add_command(load_family(name), name)
    return root


# Commands that need no root: they print, read only files given to them, or (class) work over SSH
ROOT_FREE = {"show", "doctor", "class"}
SUDO_ENV = "LABKIT_NO_SUDO"     # 1: never re-run through sudo (say that root is needed instead)


def needs_root(argv: list[str]) -> bool:
    """Whether this command line touches the labs (their state lives with root)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or any(a in ("-h", "--help", "--version") for a in argv):
        return False
    return words[0] not in ROOT_FREE


def become_root(argv: list[str]) -> None:
    """Run this command again through sudo when it needs root and labkit is not root: sudo asks for
    the password on a terminal. Without sudo, or where sudo cannot ask, one line says what to do.
    LABKIT_* variables go along (`--preserve-env`)."""
    if os.geteuid() == 0 or not needs_root(argv) or os.environ.get("_LABKIT_COMPLETE"):
        return
    command = "labkit " + next(a for a in argv if not a.startswith("-"))
    sudo = shutil.which("sudo")
    if os.environ.get(SUDO_ENV, "").strip() in ("1", "true", "yes") or sudo is None:
        raise LabkitError(f"`{command}` needs root: run it as root or with sudo")
    if not sys.stdin.isatty() and subprocess.run([sudo, "-n", "true"], capture_output=True).returncode != 0:
        raise LabkitError(f"`{command}` needs root: run it with sudo (sudo cannot ask for a password here, "
                          "without a terminal)")
    keep = sorted(k for k in os.environ if k.startswith("LABKIT_") or k == "KUBECONFIG")
    preserve = [f"--preserve-env={','.join(keep)}"] if keep else []
    sys.stdout.flush()
    os.execv(sudo, [sudo, *preserve, sys.executable, "-m", "labkit", *argv])


def main():
    try:
        become_root(sys.argv[1:])
        app(prog_name="labkit")        # also as `python -m labkit`: help and completion say labkit
    except LabkitError as exc:
        sys.stderr.write(f"labkit: {exc}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("labkit: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
