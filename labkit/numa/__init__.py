"""labkit's reconstruction of kubelet's NUMA resource managers (Topology, CPU and Memory Manager).

Nothing is imported here (so `labkit` starts fast); import the module you need. Every module says
which upstream files and release it follows. The public API, by module:

Machines — `labkit.numa.machine`
    load_machine(path_or_fixture_name) -> Machine     cadvisor MachineInfo JSON, validated
    machine_from_dict(dict, source=...) -> Machine    e.g. what `labkit numa discover` produced
    fixture_names() -> [str]                          shipped machines (labkit/numa/machines/*.json):
        single-socket-ht, dual-socket-ht, dual-socket-no-ht, dual-socket-multi-numa-ht,
        quad-socket-four-way-ht (kubelet's test topologies), lab-two-node (2 sockets x 1 NUMA node,
        4 cores x 2 threads each, hugepages, one GPU and one NIC per node)
    Machine: num_cores, num_sockets, memory_capacity, nodes [Node(node_id, memory, hugepages,
        cores [Core(core_id, thread_ids, socket_id)], distances)], devices {resource: [Device(id,
        numa_nodes)]} (labkit's extension field "devices"), node_ids, node(id), all_cpus(), to_dict()

Admission — `labkit.numa.admission` (what `labkit numa admit` runs)
    Node(machine, KubeletConfig, state_dir=None)     starts the managers; restores/validates checkpoints;
                                                     raises KubeletStartError with kubelet's message
    node.admit_all([Pod]) -> [PodResult]             admits in order, fills in cpus / memory nodes
    node.admit(pod) -> PodResult                     (cpus / memory nodes not filled in)
    node.save() -> [Path]                            writes cpu_manager_state, memory_manager_state
    node.shared_pool(), node.reserved_cpus()         frozensets of CPU ids
    node.container_cpus(pod_uid, container) -> (cpus, exclusive)   what kubelet writes to cpuset.cpus
    node.container_memory_nodes(pod_uid, container) -> [ids] | None (None: cpuset.mems not restricted)
    node.device_assignments(pod_uid, container) -> {resource: [device ids]}
    PodResult: pod, qos, result (AdmitResult admit/reason/message), scope, containers
        [ContainerResult(name, init, evaluated, hints {resource: None | [TopologyHint]}, best_hint, cpus,
        exclusive, memory_nodes)], to_json()
    Configuration: labkit.numa.config.load_config(path | None) -> KubeletConfig (kubelet's validation
    messages; `warnings` for likely typos). Pods: labkit.numa.pods.load_pods(path) -> [Pod],
    pod_from_dict(dict), qos_class(pod) -> "Guaranteed" | "Burstable" | "BestEffort".

Topology Manager merge — `labkit.numa.merge` (what `labkit numa merge` runs)
    TopologyHint(mask: int | None, preferred: bool)  .to_json() / .from_json(); mask None = nil
    NUMAInfo(nodes, distances={node: [d...]})
    Policy(name, numa_info, prefer_closest=False, brute_force=False).merge(providers) -> MergeResult(hint,
        admit, lists); providers: [None | {resource: None | [TopologyHint]}] — a None provider, an empty
        map, a None hint list and an empty hint list mean what they mean to kubelet
    HintMerger(numa_info, lists, policy_name, prefer_closest): compare(current, candidate) (returns one
        of the two objects), merge() (fast, from reachable masks), merge_brute_force() (kubelet's fold)
    filter_providers_hints, filter_single_numa_hints, merge_permutation, iterate_permutations,
    max_of_min_affinity_counts, provider_list_labels, hints_from_json(json_providers), sort_hints
    Scopes and admission: labkit.numa.topologymanager.TopologyManager(machine, policy, scope, options)

CPU Manager — `labkit.numa.cpumanager`, `labkit.numa.cpu_assignment`
    StaticPolicy(topology, num_reserved_cpus, reserved_cpus=frozenset(), affinity=lambda pod, c: hint,
        options={...} | StaticPolicyOptions, topology_manager_policy="none"): start(state),
        allocate(state, pod, container), remove_container(state, pod_uid, name),
        get_topology_hints(state, pod, container), get_pod_topology_hints(state, pod),
        generate_cpu_topology_hints(available, reusable, request), guaranteed_cpus, pod_guaranteed_cpus,
        allocate_cpus(state, n, mask, reusable), reserved_cpus, reserved_physical_cpus
    CPUState(default_cpu_set, assignments {pod: {container: cpus}}); SMTAlignmentError; CPUManagerError
    take_by_topology_numa_packed(topology, available, n) / take_by_topology_numa_distributed(topology,
        available, n, group) -> frozenset (CPUAllocationError with kubelet's message);
        CPUAccumulator (free_sockets, free_numa_nodes, free_cores, free_cpus, take, ...)
    labkit.numa.topology.CPUTopology.discover(machine) / .from_table(cpu_topologies.json fixture)

Memory Manager — `labkit.numa.memorymanager`
    StaticPolicy(nodes, system_reserved {node: {resource: bytes}}, affinity): start, allocate,
        remove_container, get_topology_hints, get_pod_topology_hints, calculate_hints,
        default_machine_state, memory_numa_nodes; nodes_from_topology([cadvisor node dicts])
    MemoryState(machine_state {node: NUMANodeState(number_of_assignments, memory_map {resource:
        MemoryTable(total, system_reserved, allocatable, reserved, free)}, cells)}, assignments
        {pod: {container: [Block(numa_affinity, type, size)]}}); MemoryManagerError

Checkpoints — `labkit.numa.checkpoint`
    read_cpu_checkpoint(dir, policy) / write_cpu_checkpoint(dir, policy, CPUState), the same for
    memory; CheckpointError carries kubelet's refusal message; cpu_checksum(...), memory_checksum(...)
    and the exact go-spew dumps they hash.

Small values: labkit.numa.bitmask (masks are ints), labkit.numa.cpuset (parse / format_cpus),
labkit.quantity (shared with the API server: Quantity.parse("500m"), value_int(), milli_value(),
as_int64(), str()).
"""
