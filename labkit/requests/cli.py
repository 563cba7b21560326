"""`labkit requests ...`: the requests lab's tools.

  explain    what each stage of the API server's pipeline decided about requests
  webhook    serve an admission webhook you wrote (as a lab process), its certificates
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from labkit import cliopts
from labkit.errors import LabkitError

LAB_ID = "requests"
app = typer.Typer(help="The API server's request pipeline: `explain` a request stage by stage; serve an admission "
                       "`webhook` you wrote.", no_args_is_help=True)
webhook_app = typer.Typer(help="Admission webhooks you write, served as lab processes on 127.0.0.1 with certificates "
                               "from the lab's webhook CA.", no_args_is_help=True)
app.add_typer(webhook_app, name="webhook")


def _env():
    from labkit import runner
    return runner.running_env(LAB_ID)


def _state_dir(state: Optional[Path]) -> Path:
    from labkit import paths
    return state or paths.state_root() / LAB_ID / "apiserver"


@app.command("explain", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def explain_command(
    args: Optional[List[str]] = typer.Argument(None, metavar="[AUDIT_ID...] | -- kubectl ARGS...",
                                               help="Audit IDs to explain (the audit log shows "
                                                    "them), or a kubectl command after `--` to run and explain."),
    last: int = typer.Option(1, "--last", "-n", min=1, max=1000,
                             help="Without AUDIT_ID: the newest N requests sent by kubectl."),
    all_requests: bool = typer.Option(False, "--all", "-a",
                                      help="Every client's requests (controllers too) and discovery requests, "
                                           "not only kubectl's requests for resources."),
    state: Optional[Path] = typer.Option(None, "--state", help="The embedded API server's state directory "
                                         "(default: the requests lab's, <state root>/requests/apiserver)."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Show what happened to a request inside the API server, stage by stage: the authenticator
    that recognised the caller, impersonation, the RBAC binding and role that allowed it (or that
    none did), each admission plugin and webhook with its patch, validation, storage, and the
    audit event with its level and annotations.

    \b
      labkit requests explain             the newest request kubectl sent
      labkit requests explain -n 5        the newest five
      labkit requests explain AUDIT_ID    one request (its auditID in the audit log:
                                          the trace of every request in it is kept)
      labkit requests explain -- kubectl run x -n web --image=nginx:1.27
                                          run kubectl, then explain what it sent
    """
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.apiserver import audit as audit_log
    from labkit.apiserver.client import HttpClient
    from labkit.requests.explain import combine, is_kubectl, is_resource_request, render

    state_dir = _state_dir(state)
    config = state_dir / "kubeconfig"
    if not config.is_file():
        raise LabkitError(f"no API server state at {state_dir}: is the lab running? (`labkit run {LAB_ID}`, or --state DIR)")
    client = HttpClient.for_embedded(config)
    args = list(args or [])
    command = args[args.index("kubectl"):] if "kubectl" in args else None
    ids = [a for a in args if a != "--"] if command is None else []
    started = time.time()
    if command:
        done = subprocess.run(command, text=True)
        sys.stdout.flush()
        typer.echo(f"(kubectl exited with {done.returncode})\n", err=True)
    try:
        if ids:
            traces = []
            for audit_id in ids:
                code, body = client.request("GET", f"/labkit/v1/traces/{audit_id}")
                if code != 200:
                    raise LabkitError(f"no trace of audit ID {audit_id}: the API server traces every request it "
                                      f"answers, and keeps each one as long as its audit event "
                                      f"({state_dir / 'traces.log'} beside {state_dir / 'audit.log'}); copy the ID "
                                      "from this lab's audit log (`auditID`)")
                traces.append(body)
        else:
            code, body = client.request("GET", "/labkit/v1/traces", {"limit": "1000"})
            if code != 200:
                raise LabkitError(f"the API server did not answer its traces ({code})")
            traces = body.get("items") or []
    except OSError as exc:
        raise LabkitError(f"cannot reach the API server: {exc}")
    items = combine(traces, audit_log.read(state_dir / "audit.log"))
    if not ids:
        if not all_requests:
            items = [i for i in items if is_kubectl(i) and is_resource_request(i)]
        if command:
            items = [i for i in items if i.event and audit_log.received_at(i.event) >= started - 0.001]
        else:
            items = items[-last:]
    if as_json:
        sys.stdout.write(json.dumps([i.as_dict() for i in items], indent=2) + "\n")
    else:
        sys.stdout.write(render(items))


@webhook_app.command("serve")
def webhook_serve(
    file: Path = typer.Argument(..., help="Your webhook: a Python file defining review(admission_review) -> "
                                           "admission_review (or, with --server, a whole HTTPS server)."),
    name: str = typer.Option("my-webhook", "--name", help="Its name: one certificate, port and log per name."),
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535,
                                       help="Port on 127.0.0.1 (default: the one it had, else a free one)."),
    server: bool = typer.Option(False, "--server", help="FILE is a whole server: run `python FILE` with "
                                "WEBHOOK_CERT, WEBHOOK_KEY, WEBHOOK_HOST and WEBHOOK_PORT in its environment."),
):
    """Serve your admission webhook on https://127.0.0.1:PORT as a lab process.

    A webhook of that name that runs is restarted; `labkit cleanup requests`
    stops it. Its serving certificate is signed by the lab's webhook CA; the
    caBundle for your webhook configuration is printed. Every review it
    answers is logged (`labkit requests webhook list` shows the log)."""
    from labkit.requests import pki, webhook

    env = _env()
    served = webhook.serve(env, file, name, port, server)
    typer.echo(f"webhook {served.name}: serving {served.file} on {served.url} (log: {served.log})")
    typer.echo(f"\nIn your webhook configuration:\n  clientConfig:\n    url: {served.url}/<path>\n"
               f"    caBundle: {pki.ca_bundle(webhook.pki_dir(env))}")


@webhook_app.command("stop")
def webhook_stop(name: str = typer.Argument("my-webhook", help="The webhook's name.")):
    """Stop a webhook you served.

    Its configuration stays: with failurePolicy Fail, requests it matches
    now fail."""
    from labkit.requests import webhook

    env = _env()
    if webhook.describe(env, name) is None:
        raise LabkitError(f"no webhook named {name!r}: `labkit requests webhook list` shows them")
    webhook.stop(env, name)
    typer.echo(f"webhook {name} stopped")


@webhook_app.command("list")
def webhook_list(output: Optional[str] = cliopts.output_option(("text", "json", "yaml", "name"), "text")):
    """The webhooks you served: name, state, URL, file and log."""
    from labkit.requests import webhook

    fmt = cliopts.resolve_output(output, ("text", "json", "yaml", "name"), "text")[0]
    env = _env()
    served = webhook.all_served(env)
    if fmt != "text":
        cliopts.print_data([{"name": s.name, "state": "running" if s.running else "stopped", "url": s.url,
                             "file": s.file, "mode": s.mode, "log": str(s.log)} for s in served],
                           fmt, name=lambda row: row["name"])
        return
    if not served:
        typer.echo("no webhook yet: `labkit requests webhook serve FILE`")
    for s in served:
        typer.echo(f"{s.name}  {'running' if s.running else 'stopped'}  {s.url}  {s.file}  log: {s.log}")


@webhook_app.command("certs")
def webhook_certs(
    name: str = typer.Argument("my-webhook", help="The webhook's name."),
):
    """Where the serving certificate and key of webhook NAME are, and the caBundle.

    They are made on first use, for 127.0.0.1 and localhost, signed by the
    lab's webhook CA; the caBundle goes into a webhook configuration."""
    from labkit.requests import pki, webhook

    env = _env()
    cert, key = webhook.certificates(env, name)
    directory = webhook.pki_dir(env)
    typer.echo(f"certificate: {cert}\nkey:         {key}\nCA:          {directory / pki.CA_CERT}\n"
               f"caBundle:    {pki.ca_bundle(directory)}")
