"""Mount propagation on real mount namespaces: a lab node, containers made from Pods the way
kubelet, containerd and runc make them, scenarios, and what every party sees.

  kernel.py     mount(2), umount2, unshare, setns, pivot_root through ctypes
  mountinfo.py  /proc/<pid>/mountinfo with its propagation fields
  party.py      the process that builds and holds the node's or a container's namespace
  pods.py       Pods, API validation, kubelet's and containerd's propagation decisions
  node.py       a lab's node and its Pods (state, processes, actions inside namespaces)
  scenario.py   MountScenario files: play them on a fresh node
  observe.py    the visibility matrix, the peer-group graph, and probes
  model.py      the same rules without mounting: a volume's propagation, who receives a mount
                event, mount(8) steps on the node's table (the mutants of the lab's checks)
  withhold.py   play, matrix and graph keep the prediction and reading exercises' answers until due
  cli.py        `labkit mounts ...`
"""
