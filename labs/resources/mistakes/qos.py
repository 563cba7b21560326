"""Common wrong answers to qos."""

import copy

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, change):
    from importlib import util
    spec = util.spec_from_file_location("resources_qos_solution", env.lab.directory / "solutions" / "qos.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = copy.deepcopy(module.ANSWER)
    change(data)
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))


@mistake("prediction is not right", "observe each case")
def forgot_defaulting(env):
    """Classifies the limits-only Pod as Burstable, forgetting that the API server copies limits into requests."""
    _write(env, lambda d: d["qos"].update(queue="Burstable"))


@mistake("prediction is not right", "oom_score_adj values")
def old_guaranteed_score(env):
    """Gives Guaranteed containers -998, the value of kubelets before the sandbox got it."""
    _write(env, lambda d: d["oom_score_adj"].update({"queue/broker": -998}))


@mistake("prediction is not right", "oom_score_adj values")
def burstable_without_request_as_besteffort(env):
    """Gives a Burstable Pod's container without a memory request 1000, like a BestEffort one."""
    _write(env, lambda d: d["oom_score_adj"].update({"api/log-shipper": 1000}))


@mistake("prediction is not right")
def init_container_ignored(env):
    """Ignores the init container without limits (migrate Guaranteed) and the container without
    requests next to a Guaranteed one (api Guaranteed), with the scores that would follow."""
    _write(env, lambda d: (d["qos"].update(migrate="Guaranteed", api="Guaranteed"),
                           d["oom_score_adj"].update({"migrate/app": -997, "api/server": -997, "api/log-shipper": -997})))


@mistake("prediction is not right")
def reads_the_processes_labkit_lists(env):
    """Before writing anything, takes the process ids `labkit resources get` lists for the qos Pods and reads
    /proc/<pid>/cgroup (kubepods/, kubepods/burstable/, kubepods/besteffort/: the class) and
    /proc/<pid>/oom_score_adj (-997 for Guaranteed, which a kernel may refuse and run with 0). Where labkit lists
    no process there is nothing to read and the answer is a guess: every Pod Burstable, every container 999."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    rows = json.loads(subprocess.run([sys.executable, "-m", "labkit", "resources", "get", "--node", "node-1",
                                      "-o", "json"], capture_output=True, text=True, check=True).stdout)
    pods = [n.strip() for n in env.lab.exercise("qos").params["pods"].split(",")]
    answer = {"qos": {}, "oom_score_adj": {}}
    for row in (r for r in rows if r["name"] in pods):
        for c in row["containers"]:
            if c["state"] != "running":
                continue
            pids = c["pids"] if isinstance(c["pids"], list) else []
            if pids:
                cgroup = Path(f"/proc/{pids[0]}/cgroup").read_text()
                qos = "Burstable" if "/burstable/" in cgroup else "BestEffort" if "/besteffort/" in cgroup else "Guaranteed"
                adj = -997 if qos == "Guaranteed" else int(Path(f"/proc/{pids[0]}/oom_score_adj").read_text())
            else:
                qos, adj = "Burstable", 999
            answer["qos"][row["name"]] = qos
            answer["oom_score_adj"][f"{row['name']}/{c['name']}"] = adj
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(answer))
