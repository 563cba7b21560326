"""Controllers that run inside the embedded API server's process.

  garbagecollector/  the garbage collector, reconstructed from pkg/controller/garbagecollector:
                     dependency graph from watch events, virtual nodes, attemptToDelete /
                     attemptToOrphan, solid / dangling / waitingForDependentsDeletion, the
                     absent-owner cache, OwnerRefInvalidNamespace events, cycles
  deployment.py      Deployment -> ReplicaSets: rolling update and recreate rollouts, pause, revisions
                     and rollback reuse, revisionHistoryLimit, progress conditions, scaling events,
                     Events (ScalingReplicaSet)
  replicaset.py      ReplicaSet -> Pods, adoption of matching orphans, release of non-matching pods,
                     minReadySeconds, Events (SuccessfulCreate, SuccessfulDelete)
  namespace.py       the namespace controller, reconstructed from pkg/controller/namespace: empties a
                     Terminating namespace through discovery (pods first), the five deletion
                     conditions, removal of the `kubernetes` finalizer via the finalize subresource
  node.py            scheduler + kubelet stand-in: registers its Node (Lease heartbeats), binds pods,
                     reports them Running, ends deleted pods in a terminal phase as their processes
                     would, records their Events
  serviceaccount.py  the `default` ServiceAccount of every namespace
  rootcacert.py      the `kube-root-ca.crt` ConfigMap of every namespace
  endpointslice.py   EndpointSlices of Services with selectors (and what Endpoints shares with it)
  endpoint.py        Endpoints of Services with selectors
  podgc.py           the pod garbage collector: orphans of missing nodes, terminating pods on
                     out-of-service nodes, unscheduled terminating pods, terminated over threshold
  volumeprotection.py  the PVC and PV protection controllers (kubernetes.io/pvc-protection,
                     kubernetes.io/pv-protection)
  persistentvolume.py  the PersistentVolume controller's binding of claims to existing volumes and
                     their release (Retain); no provisioning
  csrsigning.py      the kube-apiserver-client signer: approved CertificateSigningRequests get a
                     certificate from the cluster CA (or the condition Failed)
  manager.py         ControllerManager: start / stop / restart by name; the CONTROLLERS table
  informer.py        list + watch with a local cache (client-go reflector/informer)
  workqueue.py       client-go's rate-limited work queue
  events.py          event recorder (core/v1 Events, counted when repeated)
  decisions.py       the decision log: every decision with its reason (`labkit gc log`)
  base.py            KeyedController, ControllerExpectations, the ControllerRefManager

Controllers talk to the server only through the API (a LocalClient calling the request handler
in-process, as their own user, audit-logged), so they behave as they would against a cluster;
watches are served from the store's event log, so they are fast.

Adding a controller
-------------------
Write a class with `name`, `running`, `start()`, `stop()` and `idle()` (nothing queued, nothing
in flight: what scenarios' `wait for: settle` waits for). Most controllers are keyed sync loops:

    class WidgetController(KeyedController):
        name = "widget"

        def make_informers(self):
            return {"widgets": self.informer("example.io/v1", "widgets", "Widget", on_add=self.enqueue,
                                             on_update=lambda old, new: self.enqueue(new))}

        def sync(self, key):                 # "namespace/name"; raise to retry with backoff
            widget = self.informers["widgets"].get(key)
            ...
            self.log.record(self.name, "resize", None, f"widget {key}: ... → resize it")

and register it in manager.CONTROLLERS with the user it authenticates as:

    CONTROLLERS["widget"] = Controller("system:serviceaccount:kube-system:widget-controller",
                                       "widget:WidgetController")

Then `spawn(env, controllers=[..., "widget"])`, `labkit apiserver --controllers ...`,
`/labkit/v1/controllers/widget` and scenarios' `controllers: {widget: running}` know it (a
scenario's `controllers:` keys must also be listed in gc.scenario.CONTROLLER_STATES, and a new
scenario `category` maps to its controller in gc.runner.CATEGORY_CONTROLLERS).
"""
