"""The command line: help everywhere, exit codes, clear one-line errors, doctor."""

import inspect
import json
import os
import subprocess
import sys

import pytest

from support import REPO, labkit

COMMANDS = ["list", "run", "show", "check", "hint", "solve", "reset", "cleanup", "doctor", "shell"]


def all_command_paths():
    """Every command and sub-command, found by walking the typer app (so new ones are covered)."""
    from labkit.cli import full_command

    root = full_command()
    found = []

    def walk(cmd, path):
        found.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, path + [name])

    walk(root, [])
    return found


def test_top_level_help_lists_commands():
    out = labkit("--help", check=0).stdout
    for cmd in COMMANDS:
        assert cmd in out


@pytest.mark.parametrize("path", all_command_paths(), ids=lambda p: " ".join(p) or "labkit")
def test_every_command_has_help(path):
    """In this process, through the command tree `labkit` itself runs (labkit.cli.app, families
    loaded on first use as in `labkit FAMILY ...`); `labkit --help` as a process is tested above."""
    from typer.testing import CliRunner

    from labkit.cli import app

    result = CliRunner().invoke(app, [*path, "--help"], prog_name="labkit")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout
    # every command says what it does
    assert len(result.stdout.strip().splitlines()) > 3
    # and reads as command lines do: `LAB [EXERCISE]`, no type after a flag or an argument
    usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
    assert "{" not in usage and "[[" not in usage, usage
    for shown in ("<bool>", "<str>", "<int>", "<path>"):
        assert shown not in result.stdout, result.stdout


def _description(output: str) -> list[list[str]]:
    """The paragraphs of a rendered help's description: after the usage line, before the first box."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next((i for i, line in enumerate(lines) if line.lstrip().startswith("╭")), len(lines))
    paragraphs, current = [], []
    for line in lines[start:end]:
        if line.strip():
            current.append(line.rstrip())
        elif current:
            paragraphs.append(current)
            current = []
    return paragraphs + ([current] if current else [])


@pytest.mark.parametrize("path", [p for p in all_command_paths() if p], ids=lambda p: " ".join(p))
def test_help_paragraphs_are_filled(path):
    """Every paragraph of a command's description is wrapped at the terminal's width, not at the
    docstring's line breaks (typer joins the first paragraph's lines only): a line followed by
    another of its paragraph fills the width. Paragraphs click keeps as they are (`\\b`) are not
    judged."""
    from typer.testing import CliRunner

    from labkit.cli import app, full_command

    command = full_command()
    for name in path:
        command = command.commands[name]
    kept = [p for p in (command.help or "").split("\n\n") if p.strip().startswith("\b")]
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="labkit", env={"COLUMNS": "80"})
    for paragraph in kept:      # shown line by line: each must fit the width, or the terminal breaks it
        for line in inspect.cleandoc(paragraph).splitlines()[1:]:
            assert len(line) + 2 <= 80, f"`labkit {' '.join(path)} --help`: too wide for the terminal: {line}"
    for paragraph in _description(result.stdout):
        if any(paragraph[0].strip().split()[:2] == k.strip("\b \n").split()[:2] for k in kept):
            continue
        for line, following in zip(paragraph, paragraph[1:]):
            assert len(line) + len(following.split()[0]) + 1 > 76, \
                f"`labkit {' '.join(path)} --help` breaks a line early:\n{line}\n{following}"


def _group_paths():
    from labkit.cli import full_command

    root = full_command()       # built once: each build loads every family (a second at collection)

    def sub(path):
        command = root
        for name in path:
            command = command.commands[name]
        return command
    return [p for p in all_command_paths() if getattr(sub(p), "commands", None)]


@pytest.mark.parametrize("path", _group_paths(), ids=lambda p: " ".join(p) or "labkit")
def test_a_groups_table_of_commands_fills_each_description(path):
    """A group's table of commands shows each command's first paragraph wrapped at the column's
    width, not at the docstring's line breaks (`labkit --help` broke check's and reset's
    descriptions mid-sentence): a row's line followed by another line of the same row is full."""
    from typer.testing import CliRunner

    from labkit.cli import app

    result = CliRunner().invoke(app, [*path, "--help"], prog_name="labkit", env={"COLUMNS": "100"})
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("╭─ Commands"))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("╰"):
            break
        inner = line[2:-1]                 # between "│ " and the closing "│", its padding kept
        if inner.startswith(" "):
            rows[-1].append(inner)         # a row's next line
        else:
            rows.append([inner])
    assert rows, result.stdout
    for row in rows:
        if len(row) < 2:
            continue
        column = len(row[1]) - len(row[1].lstrip(" "))      # where the descriptions begin
        width = len(row[0]) - column - 1                       # to the cell's right padding
        texts = [r[column:].rstrip() for r in row]
        for line, following in zip(texts, texts[1:]):
            assert len(line) + 1 + len(following.split()[0]) > width, \
                f"`labkit {' '.join(path)} --help` breaks a command's description early:\n{line}\n{following}"


def test_version():
    assert labkit("--version", check=0).stdout.startswith("labkit ")


@pytest.mark.parametrize("args, message", [
    (["run", "no-such-lab"], "no lab named 'no-such-lab'"),
    (["check", "demo", "no-such-exercise"], "lab demo has no exercise 'no-such-exercise'"),
    (["check", "demo", "-o", "pdf", "--output-file", "x"], "-o/--output: expected one of table, json, yaml, junit, gradescope, got 'pdf'"),
    (["hint", "demo", "nope"], "has no exercise 'nope'"),
    (["solve", "demo", "find-address"], "lab demo is not running"),
    (["shell", "demo", "a"], "lab demo is not running"),
    (["resources", "nodes"], "the nodes belong to the resources lab, which is not running: start it with "
                             "`labkit run resources`"),
    (["numa", "show"], "the live node belongs to the numa lab, which is not running: start it with `labkit run numa`"),
    (["cleanup"], "give a LAB or --all"),
])
def test_usage_and_environment_errors_exit_2_with_one_line(args, message):
    result = labkit(*args, check=2)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_option_is_a_usage_error():
    result = labkit("check", "demo", "--frobnicate", check=2)
    assert "No such option" in result.stderr


def test_check_on_a_lab_never_started_reports_and_exits_1():
    result = labkit("check", "demo", "--format", "json", check=1)
    rep = json.loads(result.stdout)
    assert rep["total"] == 3 and rep["score"] == 0
    assert all("labkit run demo" in r["message"] for r in rep["results"])


def test_show_prints_prompt_with_params_and_answer_path():
    out = labkit("show", "demo", "find-address", check=0).stdout
    assert "Host **b** has one IPv4 address on `eth0`" in out
    assert "find-address.yaml" in out


def test_doctor_reports_every_prerequisite():
    result = labkit("doctor", "--json")
    findings = {f["name"]: f for f in json.loads(result.stdout)}
    for name in ("root", "netns", "veth", "bridge", "iptables-legacy", "iptables-extensions",
                 "mount-namespaces", "cgroup-cpuset", "kubectl", "graphviz", "conntrack", "python-packages"):
        assert name in findings, name
        assert findings[name]["status"] in ("ok", "warn", "fail")
        if findings[name]["status"] != "ok":
            assert findings[name]["fix"], f"{name} is not ok but gives no fix"
    assert result.returncode == (2 if any(f["status"] == "fail" for f in findings.values()) else 0)
    # this machine has everything labkit needs
    assert all(f["status"] != "fail" for f in findings.values()), findings
    assert "statistic" in findings["iptables-extensions"]["detail"]
    text = labkit("doctor").stdout
    assert "iptables-legacy" in text and "nf_tables" in text or "legacy backend works" in text


def test_a_state_directory_that_cannot_be_made_is_one_line_and_exit_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, "LABKIT_STATE_DIR": str(blocker / "state")}
    result = labkit("run", "requests", env=env, check=2)
    assert result.stderr.strip().splitlines() == [
        f"labkit: cannot make the lab's state directory {blocker}/state/requests: Not a directory "
        "(LABKIT_STATE_DIR chooses where labkit keeps its state)"]


def _complete(words: str, shell: str = "bash") -> list[str]:
    """What the shell's completion function gets for the command line `words` (the cursor at its end)."""
    parts = words.split(" ")
    env = {**os.environ, "_LABKIT_COMPLETE": f"complete_{shell}", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1),
           "_TYPER_COMPLETE_ARGS": words}
    out = subprocess.run([sys.executable, "-m", "labkit"], env=env, capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_completion_offers_commands_labs_and_exercises():
    assert "check" in _complete("labkit ch")
    assert _complete("labkit check mount-propagation node") == ["node-mounts-reach-reader"]
    assert _complete("labkit hint demo ") == ["find-address", "serve-greeting", "container-mount"]
    assert _complete("labkit cleanup kube") == ["kube-proxy"]
    assert _complete("labkit shell demo ") == ["a", "b", "c"]
    assert _complete("labkit kube-proxy ap") == ["apply"]        # a family's commands, loaded for it
    assert _complete("labkit class g") == ["grade"]
    # `--show-completion` names the shell it finds among labkit's ancestors (shellingham); a run of
    # the suite need not have one (a whole run whose parent shell had gone printed nothing but
    # "Shell  not supported."), so typer's own switch has it take the shell named instead
    shown = subprocess.run([sys.executable, "-m", "labkit", "--show-completion", "bash"], capture_output=True,
                           text=True, cwd=REPO, env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    script = shown.stdout
    assert "_LABKIT_COMPLETE=complete_bash" in script and "complete -o default -F _labkit_completion labkit" in script, \
        (shown.returncode, script[-300:], shown.stderr[-1500:])


def test_families_are_listed_with_their_own_help_and_loaded_only_when_used():
    """`labkit --help` lists each family by the short help kept in labkit.cli.FAMILIES, which must
    be the family's own; a plain `labkit --help` imports none of them."""
    from labkit.cli import FAMILIES, load_family

    for name, (_module, _attribute, short) in FAMILIES.items():
        own = " ".join((load_family(name).help or "").split("\n\n")[0].split())
        assert " ".join(short.split()) == own, f"labkit.cli.FAMILIES[{name!r}] says {short!r}; the family says {own!r}"
    code = ("import sys\nfrom labkit.cli import main\nsys.argv = ['labkit', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import labkit.cli as c\n"
            "print(sorted(m for m in sys.modules if m in {f[0] for f in c.FAMILIES.values()}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-500:] + out.stderr
    assert "kube-proxy's iptables mode" in out.stdout


def test_one_output_vocabulary_and_the_old_spellings_still_work_with_a_line_that_says_so(tmp_path):
    """-o is a format everywhere (kubectl's), --output-file a file; `--format`, `--json` and
    `-o FILE` keep working for one release, each saying on stderr what to write instead."""
    now = labkit("check", "demo", "-o", "json", check=1)
    assert json.loads(now.stdout)["lab"] == "demo" and now.stderr == ""
    assert labkit("check", "demo", "-o", "yaml", check=1).stdout.startswith("labkit: ")
    old = labkit("check", "demo", "--format", "json", check=1)
    assert json.loads(old.stdout)["lab"] == "demo"
    assert old.stderr == "labkit: --format json is deprecated and goes away in the next release: write -o json\n"
    target = tmp_path / "report.txt"
    as_file = labkit("check", "demo", "-o", str(target), check=1)
    assert "write --output-file" in as_file.stderr and target.read_text().startswith("Demo lab")
    labkit("check", "demo", "-o", "junit", "--output-file", str(tmp_path / "r.xml"), check=1)
    assert (tmp_path / "r.xml").read_text().startswith("<?xml")
    assert "-o json and --format yaml contradict" in labkit("check", "demo", "-o", "json", "--format", "yaml", check=2).stderr
    listed = json.loads(labkit("list", "-o", "json", check=0).stdout)
    assert "demo" in [row["id"] for row in listed] and "demo" in labkit("list", "-o", "name", check=0).stdout.split()
    assert json.loads(labkit("show", "demo", "-o", "json", check=0).stdout)["exercises"][0]["id"] == "find-address"
    found = json.loads(labkit("doctor", "-o", "json").stdout)
    assert {"root", "netns"} <= {f["name"] for f in found}
    assert "write -o json" in labkit("doctor", "--json").stderr


def _visible_options():
    """(command path, option names, metavar) of every visible option of every command."""
    from labkit.cli import full_command

    def walk(cmd, path):
        for param in getattr(cmd, "params", []):
            if getattr(param, "hidden", False) or not getattr(param, "opts", None) or param.param_type_name != "option":
                continue
            yield " ".join(path), tuple(param.opts + param.secondary_opts), param.metavar
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, path + [name])
    return list(walk(full_command(), ["labkit"]))


# The class commands write grades into a directory (-o/--out DIR, as they did before kubectl's
# meaning was adopted elsewhere): the one place -o names no format.
OUTPUT_DIRECTORY_COMMANDS = {"labkit class grade", "labkit class credentials", "labkit class prepare",
                             "labkit class status"}


def test_every_command_speaks_one_flag_vocabulary():
    """-o/--output is a format (kubectl's meaning) in every command, -f is -f/--filename (or
    kubectl logs' -f/--follow); the old spellings --json, --format and --file are hidden."""
    wrong = []
    for command, names, metavar in _visible_options():
        if {"--json", "--format", "--file"} & set(names):
            wrong.append(f"{command}: {'/'.join(names)} is visible (write -o FORMAT, -f/--filename)")
        if "-o" in names and command not in OUTPUT_DIRECTORY_COMMANDS and (names != ("--output", "-o") or metavar != "FORMAT"):
            wrong.append(f"{command}: -o is {'/'.join(names)} {metavar} (it must be -o/--output FORMAT)")
        if "-f" in names and set(names) not in ({"-f", "--filename"}, {"-f", "--follow"}):
            wrong.append(f"{command}: -f is {'/'.join(names)} (kubectl's -f/--filename, or -f/--follow)")
    assert not wrong, "\n".join(wrong)


def test_family_commands_take_o_json_and_their_old_spellings(tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -d 10.96.0.1/32 -p tcp --dport 80 "
                     "-j DNAT --to-destination 10.0.0.5:8080\nCOMMIT\n")
    trace = ["trace", "--rules", str(rules), "--src", "10.0.0.2", "--dst", "10.96.0.1:80"]
    now = labkit(*trace, "-o", "json", check=0)
    assert json.loads(now.stdout)["dnat"] and now.stderr == ""
    assert "dnat:" in labkit(*trace, "-o", "yaml", check=0).stdout
    old = labkit(*trace, "--json", check=0)
    assert json.loads(old.stdout) == json.loads(now.stdout)
    assert old.stderr == "labkit: --json is deprecated and goes away in the next release: write -o json\n"
    take = labkit("numa", "take", "--machine", "dual-socket-ht", "--count", "2", "-o", "json", check=0)
    assert len(json.loads(take.stdout)["cpus"]) == 2 and take.stderr == ""
    target = tmp_path / "machine.json"
    labkit("numa", "discover", "--output-file", str(target), check=0)
    assert json.loads(target.read_text())["num_cores"] == os.cpu_count()


def test_a_format_a_command_lacks_is_refused_and_kubectls_equals_form_is_taken():
    """`-o wide` where a command has no wide output is a format asked for, not the old `-o FILE`:
    refused naming the formats there are, as kubectl refuses it; `-o=json` is `-o json`."""
    from labkit import cliopts
    from labkit.errors import LabkitError

    with pytest.raises(LabkitError, match='unable to match a printer suitable for the output format "wide", '
                                          "allowed formats are: text, json"):
        cliopts.resolve_output("wide", ("text", "json"), "text")
    assert cliopts.resolve_output("=json", ("text", "json"), "text") == ("json", None)
    from pathlib import Path
    assert cliopts.resolve_output("out.txt", ("text", "json"), "text")[1] == Path("out.txt")
