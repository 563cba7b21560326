"""The reference scheduler (solutions/my_scheduler.py, a reference file: not in the lab's directory when it is
set up without its solutions): filters as the default profile would here,
picks the node with the most free CPU, binds through pods/binding. Run as a lab process; the
solution waits until it has bound the three Pods."""

import shutil
from pathlib import Path

from labkit import paths
from labkit.apiserver.target import for_env
from labkit.errors import LabkitError
from labkit.exercises import wait_for
from labkit.scheduler import own


def solve(env):
    program = paths.answers_root() / "scheduler" / "my_scheduler.py"
    program.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(paths.reference_file(Path(env.lab.directory), "solutions/my_scheduler.py"), program)
    target = for_env(env)
    own.serve(env, program, target)
    client = target.client()
    jobs = env.lab.environment_module().JOBS

    def bound():
        return all((client.get("v1", "pods", name, "sched").get("spec") or {}).get("nodeName") for name in jobs)
    if not wait_for(bound, timeout=30, interval=0.2):
        raise LabkitError(f"my-scheduler did not bind the Pods within 30 s (log: {own.log_path(env)})")
