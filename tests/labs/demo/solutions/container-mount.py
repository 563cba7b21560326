import subprocess


def solve(env):
    pid = env.lab.environment_module().hosts(env)["c"].pid
    subprocess.run(["nsenter", f"--target={pid}", "--mount", "--", "mount", "-t", "tmpfs", "tmpfs",
                    str(env.dir / "c-data")], check=True)
