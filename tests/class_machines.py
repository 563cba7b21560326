"""Fake student machines for class-grading tests: real OpenSSH servers on loopback ports.

Each machine is its own `sshd -D` (Debian's openssh-server) with its own config, host key and
port. Its sessions get the machine's labkit instance through the config's `SetEnv`
(LABKIT_STATE_DIR, LABKIT_ANSWERS_DIR, LABKIT_PREFIX, LABKIT_LABS_PATH), so a login to machine
"alice" sees alice's labs only, exactly as `labkit` on alice's VM would. Logins are root with a
key generated for the test (`StrictModes no`, since the files live in the test's directory).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "labkit-test", "-f", str(path)],
                   check=True, capture_output=True)
    return path


@dataclass
class FakeMachine:
    name: str
    dir: Path
    env: dict[str, str]                 # the machine's labkit instance (for setting it up directly)
    port: int = 0
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, client_key: Path) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        host_key = keygen(self.dir / "host_key")
        (self.dir / "authorized_keys").write_text(Path(str(client_key) + ".pub").read_text())
        self.port = free_port()
        setenv = " ".join(f'"{k}={v}"' for k, v in self.env.items() if k.startswith("LABKIT_") or k == "PATH")
        (self.dir / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
            f"PidFile {self.dir / 'sshd.pid'}\nAuthorizedKeysFile {self.dir / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nX11Forwarding no\n"
            "AllowTcpForwarding no\nPrintMotd no\nLogLevel ERROR\n"
            f"SetEnv {setenv}\n")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privilege separation directory
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
                                     stdout=subprocess.DEVNULL, stderr=open(self.dir / "sshd.log", "w"))
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"sshd of {self.name} did not start: {(self.dir / 'sshd.log').read_text()}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
