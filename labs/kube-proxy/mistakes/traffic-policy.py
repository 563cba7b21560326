"""Common wrong predictions for traffic-policy."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, prediction):
    path = answer_path(env.lab.id, "traffic-policy")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(prediction))


@mistake("prediction is not right")
def everything_answers_everywhere(env):
    """Predicts that every node answers for both Services, keeping the client's address."""
    yes = {"answers": True, "client_ip_preserved": True}
    _write(env, {"shop-cluster": {"node1": yes, "node2": yes}, "shop-local": {"node1": yes, "node2": yes}})


@mistake("prediction is not right")
def cluster_keeps_the_client_address(env):
    """Predicts the answers right but thinks Cluster keeps the client's address too."""
    yes = {"answers": True, "client_ip_preserved": True}
    _write(env, {"shop-cluster": {"node1": yes, "node2": yes},
                 "shop-local": {"node1": yes, "node2": {"answers": False}}})


@mistake("prediction is not right", "you changed Service shop-local", "as built")
def predicts_after_changing_the_situation(env):
    """Sets shop-local's externalTrafficPolicy to Cluster to experiment, observes, and writes down what it then
    sees (both Services behaving like Cluster), instead of predicting the lab as built."""
    from labkit.kubeproxy import live
    svc = live.load(env).service("shop-local")
    svc["spec"]["externalTrafficPolicy"] = "Cluster"
    live.apply_documents(env, [svc], "mistakes/traffic-policy.py")
    cluster = {"answers": True, "client_ip_preserved": False}
    _write(env, {"shop-cluster": {"node1": cluster, "node2": cluster}, "shop-local": {"node1": cluster, "node2": cluster}})


@mistake("you sent a request from client", "yourself", "before your prediction was recorded", "--forget-prediction")
def observes_with_a_shells_curl_first(env):
    """labkit's curl withholds the outcome, so curl in a shell on the client (`labkit shell kube-proxy client --
    curl ...`) to node1's NodePort of shop-local, then the right prediction, written after seeing the answer."""
    import subprocess

    from labkit.netlab.netns import netns_path
    subprocess.run(["nsenter", f"--net={netns_path(env.netns_name('client'))}", "--", "curl", "-s", "-m", "2",
                    "192.168.50.11:30101"], capture_output=True, check=False)
    env.lab._load("solutions/traffic-policy.py").solve(env)


@mistake("prediction is not right", "how many of its 6 cells")
def pods_only_on_node1_so_node2_drops_both(env):
    """Thinks node2 drops both NodePorts, as neither Service has a pod there, and that Cluster keeps the
    client's address for the pods on node1. Its prediction has 6 cells (no client address where it
    predicts no answer): the feedback counts those, not the cells of the right prediction, whose
    count would tell how many requests go unanswered."""
    yes = {"answers": True, "client_ip_preserved": True}
    _write(env, {"shop-cluster": {"node1": yes, "node2": {"answers": False}},
                 "shop-local": {"node1": yes, "node2": {"answers": False}}})


@mistake("client_ip_preserverd", "which this exercise does not read")
def misspells_client_ip_preserved(env):
    """The right prediction, but client_ip_preserved misspelled where the node does not answer. It
    was read as left out (allowed there) and passed; a key the exercise does not read makes the
    prediction malformed, as a misspelled key does everywhere."""
    env.lab._load("solutions/traffic-policy.py").solve(env)
    path = answer_path(env.lab.id, "traffic-policy")
    prediction = yaml.safe_load(path.read_text())
    cell = prediction["shop-local"]["node2"]
    assert cell == {"answers": False}, cell
    cell["client_ip_preserverd"] = False
    path.write_text(yaml.safe_dump(prediction))
