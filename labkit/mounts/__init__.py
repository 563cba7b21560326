"""Mount propagation on real mount namespaces: a lab node, containers made from Pods the way
kubelet, containerd and runc make them, scenarios, and what every party sees.

  kernel.py     mount(2), umount2, unshare, setns, pivot_root through ctypes
  mountinfo.py  /proc/<pid>/mountinfo with its propagation fields
  party.py      the process that builds and holds the node's or a container's namespace
  pods.py       Pods, API validation, kubelet's and containerd's propagation decisions
  node.py       a lab's node and its Pods (state, processes, actions inside namespaces)
  scenario.py   MountScenario files: play them on a fresh node
  observe.py    the visibility matrix and the peer-group graph
  cli.py        `labkit mounts ...`
"""
