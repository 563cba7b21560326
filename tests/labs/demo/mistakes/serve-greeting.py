"""Common wrong solutions to serve-greeting."""

from labkit.exercises import mistake


@mistake("answered", "HTTP 404")
def wrong_file_name(env):
    """Creates the file under another name."""
    (env.dir / "www" / "greeting.txt").write_text("hello\n")


@mistake("answered", "'hi'")
def wrong_text(env):
    """Serves other text."""
    (env.dir / "www" / "greeting").write_text("hi\n")
