"""Near-misses of the hairpin answer: each field dropped, emptied or cut short; the addresses
swapped for the other plausible ones (the pod's own IP, its node's LAN address, the pod gateway,
another pod's IP); the chain swapped for the pod's KUBE-SEP chain of catalog (another Service
selecting the same pod), web's KUBE-SVC chain, or web-2's KUBE-SEP chain. An address cut short or
emptied is no IP address: the check says so for that field before it grades anything."""

from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, service_chain, service_port_name
from labkit.mutants import Mutant, tree_edits


def mutants(ctx):
    answer = ctx.answer()
    state = live.load(ctx.env)
    pod = state.pod(ctx.params["pod"])
    node = pod["spec"]["nodeName"]
    gateway = state.network_layout().node(node).pod_gateway
    other = next(p for p in state.pods if p["metadata"]["name"] != pod["metadata"]["name"]
                 and p["metadata"]["labels"] == pod["metadata"]["labels"])
    addresses = [pod["status"]["podIP"], state.node_address(node), gateway, other["status"]["podIP"]]
    spn = service_port_name("default", ctx.params["service"], "http")
    chains = [endpoint_chain(service_port_name("default", "catalog", "http"), "tcp", f"{pod['status']['podIP']}:8080"),
              service_chain(spn, "tcp"), endpoint_chain(spn, "tcp", f"{other['status']['podIP']}:8080")]
    alternatives = {"seen_by_itself": addresses, "seen_by_others": addresses, "chain": chains}
    for key, value in answer.items():
        alternatives[key] = alternatives[key] + [value[:-1], ""]
    for edit in tree_edits(answer, alternatives=alternatives):
        if edit.op == "drop":
            names = (edit.key,)
        elif edit.key in ADDRESSES and not _is_address(edit.after):
            names = (edit.key, "expected an IP address")      # told as a format slip, before any grading
        else:
            names = ("wrong",)
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"answer: {edit.describe()}", names=names, answer=edit.value)


ADDRESSES = ("seen_by_itself", "seen_by_others")


def _is_address(value) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(str(value).strip())
    except ValueError:
        return False
    return True
