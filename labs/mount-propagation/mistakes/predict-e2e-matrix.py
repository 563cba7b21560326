"""Common wrong predictions of the e2e matrix."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, matrix):
    path = answer_path(env.lab.id, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(matrix))


@mistake("prediction is not right")
def slave_sends_back(env):
    """Thinks HostToContainer also sends the container's own mounts back to the host (and so to master)."""
    _write(env, {"host": ["master", "slave", "host"], "master": ["master", "slave", "host"],
                 "slave": ["master", "slave", "host"], "private": ["private"], "default": ["default"]})


@mistake("prediction is not right")
def none_receives_from_host(env):
    """Thinks None (and unset) still receive what the host mounts later, like HostToContainer."""
    _write(env, {"host": ["master", "host"], "master": ["master", "host"], "slave": ["master", "slave", "host"],
                 "private": ["private", "host"], "default": ["default", "host"]})


@mistake("prediction is not right")
def slave_only_from_host(env):
    """Thinks a HostToContainer container receives only the host's own mounts, not what a Bidirectional
    container publishes to the host."""
    _write(env, {"host": ["master", "host"], "master": ["master", "host"], "slave": ["slave", "host"],
                 "private": ["private"], "default": ["default"]})


@mistake("prediction is not right")
def everyone_sees_everything(env):
    """Thinks one shared hostPath shows every mount to every party, whatever the propagation mode."""
    everything = ["master", "slave", "private", "default", "host"]
    _write(env, {party: everything for party in ("host", "master", "slave", "private", "default")})


@mistake("ran the e2e experiment by hand")
def does_the_experiment_on_the_live_pods_first(env):
    """Before predicting, does the e2e experiment by hand on the live e2e Pods (`labkit mounts exec PARTY -- mount
    -t tmpfs ...` in each, then on the node) and writes down what each party's mountinfo shows. Where labkit
    refuses to show it, there is nothing to copy and the answer is a guess: every party sees only its own; the
    first mount made before a prediction was written is kept as a try of the experiment by hand all the same."""
    import subprocess
    import sys

    def labkit(party, script):
        return subprocess.run([sys.executable, "-m", "labkit", "mounts", "exec", party, "--", "sh", "-c", script],
                              capture_output=True, text=True)

    parties = ("master", "slave", "private", "default")
    for party in parties:
        labkit(party, f"mkdir -p /mnt/test/{party} && mount -t tmpfs {party} /mnt/test/{party}")
    labkit("node", "mkdir -p /var/lib/kubelet/e2e/host && mount -t tmpfs host /var/lib/kubelet/e2e/host")
    names = ("host", *parties)
    seen = {}
    for party in ("host", *parties):
        out = labkit("node" if party == "host" else party, "cat /proc/self/mountinfo")
        if out.returncode != 0:
            seen = {p: [p] for p in names}
            break
        seen[party] = [n for n in names if any(line.split(" - ")[-1].split()[1:2] == [n]
                                               for line in out.stdout.splitlines())]
    _write(env, seen)


@mistake("ran the e2e experiment by hand", "written after")
def does_the_whole_experiment_in_one_node_command_first(env):
    """Before writing anything, runs the whole experiment in one command on the node, which sees every
    container's process: `nsenter -t PID -m mount -t tmpfs ...` into each e2e container, a tmpfs of
    the node's own, then every party's /proc/PID/mountinfo; one command, so labkit's gate (which looks
    when a command starts) lets it run. Then writes down what it printed: the right matrix."""
    import json
    import subprocess
    import sys

    def labkit(*args):
        return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True)

    answer_path(env.lab.id, "predict-e2e-matrix").unlink(missing_ok=True)
    pids = {row["pod"]: row["state"]["pid"] for row in json.loads(labkit("mounts", "get", "-o", "json").stdout)
            if row["pod"] in ("master", "slave", "private", "default")}
    script = "".join(f"nsenter -t {pid} -m sh -c 'mkdir -p /mnt/test/{party} && mount -t tmpfs {party} "
                     f"/mnt/test/{party}'; " for party, pid in pids.items())
    script += "mkdir -p /var/lib/kubelet/e2e/host && mount -t tmpfs host /var/lib/kubelet/e2e/host; "
    script += "".join(f"echo {party}; cat /proc/{pid}/mountinfo; " for party, pid in pids.items())
    script += "echo host; cat /proc/self/mountinfo"
    out = labkit("mounts", "exec", "node", "--", "sh", "-c", script).stdout
    names = ("host", *pids)
    seen, party = {}, None
    for line in out.splitlines():
        if line in names:
            party = line
            seen[party] = []
        elif party is not None and " - " in line:
            source = line.split(" - ")[-1].split()[1:2]
            if source and source[0] in names and source[0] not in seen[party]:
                seen[party].append(source[0])
    _write(env, seen)
