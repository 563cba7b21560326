"""kubelet's device manager (pkg/kubelet/cm/devicemanager, v1.34.1), reconstructed ahead of the
device-plugins lab: registration, ListAndWatch bookkeeping and the node's capacity/allocatable,
the plugin-death grace period, allocation (reusable init-container devices, topology-aware
filtering, GetPreferredAllocation), topology hints, admission errors, and the
kubelet_internal_checkpoint. A plugin is any object that answers the DevicePlugin service's calls
(labkit.devices.manager.Plugin); the gRPC transport comes with the lab.

  manager.py     the device manager
  checkpoint.py  kubelet_internal_checkpoint: JSON, checksum, restore
  gpushare.py    tkestack gpu-manager's share-mode GPU choice (the contrast: fractions outside kubelet)
  play.py        the fidelity cases' format
"""
