"""kube-scheduler v1.34.1, reconstructed: the framework's scheduling cycle with the default profile's
plugins, the FailedScheduling message, DefaultPreemption, the queue's backoff, and the NoExecute
taint manager that evicts Pods from tainted nodes.

  objects.py       Pods and Nodes as the scheduler reads them (requests, tolerations, affinity)
  framework.py     statuses, the profile, one scheduling cycle, FitError's message
  plugins.py       the default plugins' Filter / Score / NormalizeScore
  preemption.py    DefaultPreemption's PostFilter
  queue.py         backoff durations
  tainteviction.py the taint manager's eviction times
  play.py          the fidelity cases' format: play one and compare it with its expectations

Every decision keeps its record (each plugin's status per node, raw and normalised scores), so an
explanation can never disagree with what was decided.
"""
