"""Grading a whole class: `labkit class grade --inventory FILE`.

Every student machine runs the same checks the student runs (`labkit check LAB --format json`),
executed as root over SSH at grading time, so no grade comes from a file a student could write.

  inventory.py   the machines: YAML, CSV, or `vagrant ssh-config` output as is
  remote.py      one `labkit check` on one machine over the system ssh client (timeouts, retries)
  grade.py       all machines with bounded parallelism; the class result model and its statistics
  outputs.py     gradebook.csv, per-student Gradescope results.json and JUnit XML, raw JSON
  report.py      the class report: one self-contained static HTML page
  cli.py         the `labkit class` sub-commands
"""
