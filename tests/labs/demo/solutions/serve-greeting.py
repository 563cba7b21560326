def solve(env):
    (env.dir / "www" / "greeting").write_text("hello\n")
