"""One flag vocabulary for every labkit command, kubectl's where kubectl has one:

  -o, --output FORMAT    what to print: json, yaml, wide, name, table, ... (never a file)
  --output-file FILE     write it to a file instead of standard output
  -f, --filename PATH    objects to read: a file, a directory (its .yaml/.yml/.json files), or -
  -w, --watch            keep printing as things change

Older spellings (`--format`, `--json`, `-o FILE`, `--follow`, `--file`) keep working for one
release; each use prints one line on standard error that says what to write instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from labkit.errors import LabkitError


def output_option(formats: tuple[str, ...], default: str | None = None):
    shown = "|".join(formats)
    return typer.Option(None, "--output", "-o", metavar="FORMAT",
                        help=f"Output format: {shown}" + (f" (default {default})." if default else "."))


def output_file_option():
    return typer.Option(None, "--output-file", metavar="FILE", help="Write the output to FILE instead of printing it.")


def legacy_json_option():
    return typer.Option(False, "--json", hidden=True, help="Old spelling of -o json.")


def legacy_format_option():
    return typer.Option(None, "--format", hidden=True, help="Old spelling of -o.")


def legacy_file_option():
    return typer.Option(None, "--file", hidden=True, help="Old spelling of -f/--filename.")


def filenames(new: Optional[list], old: Optional[list]) -> list:
    """-f/--filename values, with those of the old `--file` spelling (said to be deprecated);
    at least one is needed."""
    if old:
        deprecated("--file", "-f/--filename")
    found = [*(new or []), *(old or [])]
    if not found:
        raise LabkitError("give the file to read with -f/--filename FILE")
    return found


def print_data(data, fmt: str, name=None) -> None:
    """Machine output: json, yaml, or (for listings) one name a line."""
    import json
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    elif fmt == "yaml":
        import yaml
        sys.stdout.write(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False,
                                        allow_unicode=True))
    elif fmt == "name":
        sys.stdout.write("".join(f"{name(item)}\n" for item in data))
    else:
        raise ValueError(f"no machine format {fmt!r}")


def deprecated(old: str, new: str) -> None:
    sys.stderr.write(f"labkit: {old} is deprecated and goes away in the next release: write {new}\n")


def resolve_output(output: Optional[str], formats: tuple[str, ...], default: str, *,
                   legacy_format: Optional[str] = None, legacy_json: bool = False,
                   output_file: Optional[Path] = None) -> tuple[str, Optional[Path]]:
    """(format, file) from -o/--output, --output-file and the old spellings: `--format F`,
    `--json`, and `-o FILE` (a value of -o that is no format but names a file, with a `/` or a `.`,
    is taken as the old file option; any other is refused, as kubectl refuses a format it lacks)."""
    fmt = None
    if output is not None and output.startswith("=") and output[1:] in formats:
        output = output[1:]             # `-o=json`, as kubectl's flags take it
    if output is not None and output in formats:
        fmt = output
    elif output is not None:
        if output_file is not None:
            raise LabkitError(f"-o/--output: expected one of {', '.join(formats)}, got {output!r}")
        if not any(c in output for c in "/."):
            # a word that is no format of this command (`-o wide`) is a format asked for, not a file
            raise LabkitError(f'-o/--output: unable to match a printer suitable for the output format "{output}", '
                              f"allowed formats are: {', '.join(formats)}")
        deprecated(f"-o {output} (a file)", f"--output-file {output}")
        output_file = Path(output)
    if legacy_format is not None:
        if legacy_format not in formats:
            raise LabkitError(f"--format: expected one of {', '.join(formats)}, got {legacy_format!r}")
        deprecated(f"--format {legacy_format}", f"-o {legacy_format}")
        if fmt is not None and fmt != legacy_format:
            raise LabkitError(f"-o {fmt} and --format {legacy_format} contradict each other")
        fmt = legacy_format
    if legacy_json:
        deprecated("--json", "-o json")
        if fmt is not None and fmt != "json":
            raise LabkitError(f"-o {fmt} and --json contradict each other")
        fmt = "json"
    return fmt or default, output_file


def filename_paths(values: list[str]) -> list[str]:
    """-f values as kubectl reads them: `-` (standard input), a file, or a directory's
    .yaml/.yml/.json files in name order."""
    found: list[str] = []
    for value in values:
        path = Path(value)
        if value != "-" and path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
            if not files:
                raise LabkitError(f"-f {value}: the directory has no .yaml, .yml or .json files")
            found += [str(p) for p in files]
        else:
            found.append(value)
    return found
