"""Workloads for the resources lab's containers: real CPU and real memory, at a rate you choose.

Run as `workload MODE ...` in a Pod's `command` (labkit's runtime starts this file with the
system's Python, -S -I: standard library only, so it starts in a few milliseconds).

  workload burn [--procs N]                    N processes spinning on the CPU for good
  workload serve --work MS --every MS          a request every MS ms that needs MS of CPU: prints
                                               how long requests take (latency)
  workload alloc --to SIZE [--rate SIZE/s]     allocates and touches memory up to SIZE, then holds
  workload fill --fraction F                   a cache that sizes itself to F of its cgroup's memory
                                               limit (or of the machine's memory, without a limit)
  workload sleep                               nothing, for good

SIZE takes Ki, Mi, Gi. Progress goes to stdout (the container's log) and, once the target is
reached, `reached <bytes>` is printed.
"""

import os
import sys
import time

UNITS = {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "": 1}
CHUNK = 4 * 1024 ** 2
PAGE = 4096


def size(text: str) -> int:
    text = text.strip()
    for unit in ("Ki", "Mi", "Gi"):
        if text.endswith(unit):
            return int(float(text[:-2]) * UNITS[unit])
    return int(text)


def option(args, name, default=None):
    if name in args:
        return args[args.index(name) + 1]
    if default is None:
        sys.exit(f"workload: {name} is required")
    return default


def say(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def spin() -> None:
    while True:
        pass


def burn(args) -> None:
    for _ in range(int(option(args, "--procs", "1")) - 1):
        if os.fork() == 0:
            spin()
    spin()


def serve(args) -> None:
    work = float(option(args, "--work")) / 1000
    every = float(option(args, "--every")) / 1000
    worst, count, started = 0.0, 0, time.monotonic()
    next_at = time.monotonic()
    while True:
        arrival = next_at
        deadline = time.thread_time() + work
        while time.thread_time() < deadline:
            pass
        latency = time.monotonic() - arrival
        worst, count = max(worst, latency), count + 1
        if time.monotonic() - started >= 1:
            say(f"requests {count}, slowest {worst * 1000:.0f} ms (each needs {work * 1000:.0f} ms of CPU)")
            worst, count, started = 0.0, 0, time.monotonic()
        next_at += every
        time.sleep(max(0.0, next_at - time.monotonic()))


def _own_memory_limit() -> int | None:
    """The memory limit of the cgroup this process is in (v2 memory.max, v1 memory.limit_in_bytes)."""
    for line in open("/proc/self/cgroup"):
        hierarchy, controllers, path = line.rstrip("\n").split(":", 2)
        if hierarchy == "0" and os.path.exists(f"/sys/fs/cgroup{path}/memory.max"):
            value = open(f"/sys/fs/cgroup{path}/memory.max").read().strip()
            return None if value == "max" else int(value)
        if "memory" in controllers.split(","):
            value = int(open(f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes").read())
            return None if value >= 2 ** 62 else value
    return None


def _machine_memory() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def alloc(target: int, rate: int | None) -> None:
    held = []
    total = 0
    started = time.monotonic()
    while total < target:
        chunk = min(CHUNK, target - total)
        block = bytearray(chunk)
        for i in range(0, chunk, PAGE):     # touch every page: it is really used
            block[i] = 1
        held.append(block)
        total += chunk
        if rate:
            time.sleep(max(0.0, started + total / rate - time.monotonic()))
    say(f"reached {total}")
    while True:
        time.sleep(3600)


def memory_target(command, limit=None):
    """Bytes a container running `command` holds once settled (alloc: --to; fill: the fraction of
    `limit`), or None for workloads that hold no memory of their own."""
    argv = [str(a) for a in command]
    if len(argv) < 2 or argv[0] != "workload":
        return None
    try:
        if argv[1] == "alloc":
            return size(argv[argv.index("--to") + 1])
        if argv[1] == "fill" and limit:
            return int(limit * float(argv[argv.index("--fraction") + 1]))
    except (ValueError, IndexError):
        return None      # the workload refuses such arguments: it allocates nothing
    return None


def main(argv) -> None:
    if not argv:
        sys.exit(__doc__)
    mode, args = argv[0], argv[1:]
    if mode == "burn":
        burn(args)
    elif mode == "serve":
        serve(args)
    elif mode == "alloc":
        rate = option(args, "--rate", "0").rstrip("/s")
        alloc(size(option(args, "--to")), size(rate) or None)
    elif mode == "fill":
        limit = _own_memory_limit() or _machine_memory()
        target = int(limit * float(option(args, "--fraction")))
        say(f"memory limit {limit}: filling the cache to {target}")
        alloc(target, size(option(args, "--rate", "256Mi").rstrip("/s")))
    elif mode == "sleep":
        while True:
            time.sleep(3600)
    else:
        sys.exit(f"workload: unknown mode {mode!r}\n{__doc__}")


if __name__ == "__main__":
    main(sys.argv[1:])
