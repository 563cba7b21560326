"""python -m labkit.apiserver --state DIR [--port N] [--controllers a,b|none] [--emulated-version 1.N]
[--audit-policy FILE]: run the embedded API server in the foreground until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys

from labkit.controllers.manager import CONTROLLERS, DEFAULT_CONTROLLERS


def parse_controllers(value: str) -> list[str]:
    if value.strip() in ("", "none"):
        return []
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTROLLERS]
    if unknown:
        raise ValueError(f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(CONTROLLERS)}")
    return names


def serve(state: str, port: int, controllers: list[str], announce=print, emulated_version: str | None = None,
          audit_policy: str | None = None) -> None:
    import os

    from labkit.apiserver.server import EmbeddedServer

    os.umask(0o077)   # the object database, its WAL and the audit log hold every object: private
    # SIGTERM or Ctrl-C, even one that comes while the server is starting, writes to a pipe this
    # thread waits on: a handler that set a threading.Event could deadlock (the main thread runs
    # the handler, and may hold the Event's own lock when the signal arrives, entering wait())
    woken, wake = os.pipe()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os.write(wake, b"."))
    # ... and so does the signal's arrival itself: the kernel may deliver it to another of the
    # server's threads, and then the main thread, blocked in its read, would never run the handler
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    server = EmbeddedServer(state, port, controllers, emulated_version=emulated_version, audit_policy=audit_policy)
    server.start(controllers="background")     # server.json once it listens; controllers after
    version = server.api.version
    announce(f"labkit API server listening on {server.url} (state in {server.state_dir})")
    announce(f"Kubernetes v1.34, emulating {version.name}: "
             + ", ".join(f"{gate}={str(on).lower()}" for gate, on in version.gates().items()))
    announce(f"controllers: {', '.join(controllers) or 'none'}")
    announce(f"export KUBECONFIG={server.kubeconfig}")
    os.read(woken, 1)
    server.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.apiserver", description=__doc__)
    parser.add_argument("--state", required=True, help="state directory (objects, logs, kubeconfig)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--controllers", default=",".join(DEFAULT_CONTROLLERS),
                        help=f"comma-separated, or none (known: {', '.join(CONTROLLERS)})")
    parser.add_argument("--emulated-version", default=None,
                        help="the minor release to emulate, 1.31 to 1.34 (default 1.34): its feature-gate defaults")
    parser.add_argument("--audit-policy", default=None,
                        help="an audit.k8s.io/v1 Policy file, copied to the state directory (default: the policy "
                             "there, else labkit's default)")
    args = parser.parse_args(argv)
    from labkit.apiserver.version import EffectiveVersion, VersionError
    try:
        controllers = parse_controllers(args.controllers)
        EffectiveVersion.parse(args.emulated_version)
    except (ValueError, VersionError) as exc:
        parser.error(str(exc))
    from labkit.errors import LabkitError
    try:
        serve(args.state, args.port, controllers, announce=lambda m: print(m, flush=True),
              emulated_version=args.emulated_version, audit_policy=args.audit_policy)
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
