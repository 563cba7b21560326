"""`labkit numa discover`: this host's MachineInfo agrees with what the kernel reports.

The host checks compare with independent sources (nproc, /proc/meminfo, the node's meminfo, the
affinity of a process). The sysfs-copy checks exercise the two layouts this host does not have:
no /sys/devices/system/node (a kernel without NUMA) and a two-node hyperthreaded box with more
than ten CPUs (cadvisor's lexical CPU order).
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from labkit.errors import LabkitError
from labkit.numa.cpuset import parse
from labkit.numa.discover import discover
from labkit.numa.machine import machine_from_dict
from support import labkit


def meminfo_kb(path, key="MemTotal"):
    return int(re.search(rf"{key}:\s*(\d+) kB", Path(path).read_text()).group(1))


def test_host_cpus_match_nproc_and_the_kernels_topology_files():
    machine = discover()
    threads = [t for node in machine["topology"] for core in node["cores"] for t in core["thread_ids"]]
    nproc = int(subprocess.run(["nproc", "--all"], capture_output=True, text=True, check=True).stdout)
    online = sorted(parse(Path("/sys/devices/system/cpu/online").read_text().strip()))
    assert machine["num_cores"] == len(threads) == len(set(threads)) == nproc == len(online)
    assert sorted(threads) == online
    for node in machine["topology"]:
        for core in node["cores"]:
            for cpu in core["thread_ids"]:
                topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
                assert int((topo / "core_id").read_text()) == core["core_id"]
                assert int((topo / "physical_package_id").read_text()) == core["socket_id"]
                # threads of one core are exactly the kernel's thread siblings
                assert sorted(parse((topo / "thread_siblings_list").read_text().strip())) == sorted(core["thread_ids"])
    assert machine["num_sockets"] == len({c["socket_id"] for n in machine["topology"] for c in n["cores"]})


def test_host_memory_matches_proc_meminfo_and_node_meminfo():
    before = meminfo_kb("/proc/meminfo")
    machine = discover()
    after = meminfo_kb("/proc/meminfo")
    assert machine["memory_capacity"] in (before * 1024, after * 1024)
    nodes = Path("/sys/devices/system/node")
    if nodes.is_dir():
        node_dirs = sorted(nodes.glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
        assert [n["node_id"] for n in machine["topology"]] == [int(p.name[4:]) for p in node_dirs]
        for node, directory in zip(machine["topology"], node_dirs):
            # node memory can change under a memory balloon: compare with a fresh read around it
            fresh = meminfo_kb(directory / "meminfo") * 1024
            assert abs(node["memory"] - fresh) <= 512 * 1024 * 1024
            assert node["distances"] == [int(x) for x in (directory / "distance").read_text().split()]
            for pages in node["hugepages"]:
                nr = directory / f"hugepages/hugepages-{pages['page_size']}kB/nr_hugepages"
                assert pages["num_pages"] == int(nr.read_text())
    else:
        assert len(machine["topology"]) == 1 and machine["topology"][0]["memory"] == machine["memory_capacity"]


def test_host_machine_is_valid_for_the_reconstruction():
    machine = machine_from_dict(discover(), source="this host")
    assert machine.all_cpus() == sorted(os.sched_getaffinity(1))


def test_host_nodes_are_the_nodes_a_process_may_use():
    """Every NUMA node with memory shows up in Mems_allowed_list of an unrestricted process."""
    machine = discover()
    status = Path("/proc/1/status").read_text()
    mems = sorted(parse(re.search(r"Mems_allowed_list:\s*(\S+)", status).group(1)))
    assert sorted(n["node_id"] for n in machine["topology"] if n["memory"] > 0) == mems


def test_cli_writes_the_json_to_a_file_and_to_stdout(tmp_path):
    out = tmp_path / "machine.json"
    labkit("numa", "discover", "--output", str(out), check=0)
    assert json.loads(out.read_text())["num_cores"] == os.cpu_count()
    printed = json.loads(labkit("numa", "discover", check=0).stdout)
    assert printed["topology"][0]["cores"] == json.loads(out.read_text())["topology"][0]["cores"]




def test_cli_show_draws_a_shipped_machine_and_a_simulated_placement(tmp_path):
    svg = tmp_path / "m.svg"
    out = labkit("numa", "show", "--machine", "dual-socket-ht", "-f", "labs/numa/scenarios/static-pods.yaml",
                 "--config", "labs/numa/scenarios/kubelet-static.yaml", "--svg", str(svg), check=0)
    assert "socket 1" in out.stdout and "alpha/main" in out.stdout
    assert 'data-cpu="11"' in svg.read_text() and "CPUs 2,8 exclusive" in svg.read_text()

# -- copies of other machines' sysfs -------------------------------------------------------------


def write(path: Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_cpu(root: Path, cpu: int, core: int, socket: int, siblings: str):
    topo = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
    write(topo / "core_id", f"{core}\n")
    write(topo / "physical_package_id", f"{socket}\n")
    write(topo / "thread_siblings_list", siblings + "\n")


def test_a_kernel_without_numa_is_one_node_zero_with_all_memory(tmp_path):
    for cpu in range(4):
        fake_cpu(tmp_path, cpu, core=cpu // 2, socket=0, siblings=f"{cpu - cpu % 2}-{cpu - cpu % 2 + 1}")
    write(tmp_path / "sys/devices/system/cpu/online", "0-3\n")
    write(tmp_path / "proc/meminfo", "MemTotal:        8000000 kB\nMemFree:  100 kB\n")
    write(tmp_path / "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "16\n")
    machine = discover(tmp_path)
    assert machine["num_cores"] == 4 and machine["num_physical_cores"] == 2 and machine["num_sockets"] == 1
    assert machine["memory_capacity"] == 8000000 * 1024
    (node,) = machine["topology"]
    assert node["node_id"] == 0 and node["memory"] == 8000000 * 1024 and node["distances"] == [10]
    assert node["hugepages"] == [{"page_size": 2048, "num_pages": 16}]
    assert node["cores"] == [{"core_id": 0, "thread_ids": [0, 1], "socket_id": 0},
                             {"core_id": 1, "thread_ids": [2, 3], "socket_id": 0}]


def test_two_nodes_with_hyperthreads_follow_cadvisors_order(tmp_path):
    # 12 CPUs: node 0 = cores 0-2 of socket 0, node 1 = cores 0-2 of socket 1; siblings n and n+6
    for cpu in range(12):
        socket, core = (cpu % 6) // 3, cpu % 3
        fake_cpu(tmp_path, cpu, core, socket, f"{cpu % 6},{cpu % 6 + 6}")
        node = tmp_path / f"sys/devices/system/node/node{socket}/cpu{cpu}"
        node.mkdir(parents=True)
    write(tmp_path / "sys/devices/system/cpu/online", "0-10\n")   # cpu11 offline
    for n in (0, 1):
        d = tmp_path / f"sys/devices/system/node/node{n}"
        write(d / "meminfo", f"Node {n} MemTotal:       {4000000 * (n + 1)} kB\nNode {n} MemFree: 1 kB\n")
        write(d / "distance", "10 21\n" if n == 0 else "21 10\n")
        write(d / "hugepages/hugepages-2048kB/nr_hugepages", f"{n * 8}\n")
        write(d / "hugepages/hugepages-1048576kB/nr_hugepages", "1\n")
    write(tmp_path / "proc/meminfo", "MemTotal:       12000000 kB\n")
    machine = discover(tmp_path)
    assert machine["num_cores"] == 11 and machine["num_physical_cores"] == 6 and machine["num_sockets"] == 2
    node0, node1 = machine["topology"]
    assert node0["memory"] == 4000000 * 1024 and node1["memory"] == 8000000 * 1024
    assert node1["distances"] == [21, 10]
    assert node1["hugepages"] == [{"page_size": 1048576, "num_pages": 1}, {"page_size": 2048, "num_pages": 8}]
    # lexical order cpu10, cpu3, cpu4, ...: cpu10 makes core 1 the first core and its first thread
    assert node1["cores"] == [{"core_id": 1, "thread_ids": [10, 4], "socket_id": 1},
                              {"core_id": 0, "thread_ids": [3, 9], "socket_id": 1},
                              {"core_id": 2, "thread_ids": [5], "socket_id": 1}]
    assert [c["thread_ids"] for c in node0["cores"]] == [[0, 6], [1, 7], [2, 8]]


def test_unreadable_topology_is_one_clear_error(tmp_path):
    fake_cpu(tmp_path, 0, core=0, socket=0, siblings="0")
    write(tmp_path / "sys/devices/system/cpu/cpu0/topology/core_id", "zero\n")
    write(tmp_path / "proc/meminfo", "MemTotal: 1000 kB\n")
    with pytest.raises(LabkitError, match=r"cpu0/topology/core_id: expected an integer, found 'zero'"):
        discover(tmp_path)
