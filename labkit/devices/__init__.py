"""kubelet's device manager (pkg/kubelet/cm/devicemanager, v1.34.1), reconstructed ahead of the
device-plugins lab: registration, ListAndWatch bookkeeping and the node's capacity/allocatable,
the plugin-death grace period, allocation (reusable init-container devices, topology-aware
filtering, GetPreferredAllocation), topology hints, admission errors, and the
kubelet_internal_checkpoint. A plugin is any object that answers the DevicePlugin service's calls
(labkit.devices.manager.Plugin); kubelet.py speaks for it over real gRPC.

  manager.py     the device manager
  api.py         the v1beta1 device plugin API: messages (api.proto's numbers), gRPC services
  kubelet.py     kubelet's side over gRPC: kubelet.sock, Register, ListAndWatch, Allocate, restart
  plugin.py      labkit's reference device plugin (`labkit devices plugin serve`)
  container.py   a container process that receives what Allocate returned (envs, mounts, devices)
  checkpoint.py  kubelet_internal_checkpoint: JSON, checksum, restore
  gpushare.py    tkestack gpu-manager's share-mode GPU choice (the contrast: fractions outside kubelet)
  play.py        the fidelity cases' format
"""
