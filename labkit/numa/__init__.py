"""labkit's reconstruction of kubelet's NUMA resource managers (Topology, CPU and Memory Manager).

Import the modules you need (nothing is imported here, so `labkit` starts fast):

Machines — `labkit.numa.machine`
    load_machine(path_or_fixture_name) -> Machine     cadvisor MachineInfo JSON, validated
    machine_from_dict(dict, source=...) -> Machine    (e.g. what `labkit numa discover` produced)
    fixture_names() -> [str]                          shipped machines in labkit/numa/machines/
    Machine: num_cores, num_sockets, memory_capacity, nodes[Node(node_id, memory, hugepages,
             cores[Core(core_id, thread_ids, socket_id)], distances)], devices{resource: [Device]},
             node_ids, node(id), all_cpus(), to_dict()

Small values
    labkit.numa.bitmask     masks are ints (bit i = NUMA node i), None = Go's nil mask
    labkit.numa.cpuset      parse("0-3,8") -> frozenset, format_cpus(cpus) -> "0-3,8"
    labkit.numa.quantity    Quantity.parse("500m" | "1Gi" | 2) with value_int(), milli_value(), ...
    labkit.numa.topology    CPUTopology.discover(machine) / .from_table(fixture): the CPU Manager's
                            view (NUMA node, socket, core of every CPU)

Topology Manager merge — `labkit.numa.merge`
    TopologyHint(mask: int | None, preferred: bool)   .to_json() / .from_json()
    NUMAInfo(nodes, distances={node: [d...]})
    Policy(name, numa_info, prefer_closest=False, brute_force=False).merge(providers) -> MergeResult
        providers: [None | {resource: None | [TopologyHint, ...]}]  (None/{}/None/[] as kubelet)
        MergeResult(hint, admit, lists)
    HintMerger(numa_info, lists, policy_name, prefer_closest): compare(current, candidate),
        merge() (fast, from reachable masks), merge_brute_force() (kubelet's cross product)
    filter_providers_hints, filter_single_numa_hints, merge_permutation, iterate_permutations,
    max_of_min_affinity_counts, hints_from_json(json_providers)
"""
