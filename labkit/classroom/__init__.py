"""A whole class of student machines: `labkit class grade | prepare | status | credentials`.

Every student machine runs the same checks the student runs (`labkit check LAB --format json`),
executed as root over SSH at grading time. A pass counts when it is seen live, now or by an earlier
grading run into the same output directory (seen.py, the instructor's ledger); a pass the machine
only reports as recorded (a file the student, root there, can write) is shown and not counted,
unless the instructor asks for it (--accept-recorded).

  inventory.py   the machines: YAML, CSV, `vagrant ssh-config` output as is, Ansible inventories
  ansible_inventory.py  Ansible inventories (INI, YAML, `ansible-inventory --list` JSON)
  remote.py      one labkit command on one machine over the system ssh client (timeouts, retries)
  grade.py       all machines with bounded parallelism; the class result model and its statistics
  seen.py        the instructor's ledger of passes seen live (OUT/passes-seen.jsonl)
  outputs.py     gradebook.csv, per-student Gradescope results.json and JUnit XML, raw JSON
  report.py      the class report: one self-contained static HTML page
  operations.py  `labkit class prepare LAB` and `labkit class status` over the same machinery
  credentials.py per-student SSH key pairs, sudo passwords and the roster
  cli.py         the `labkit class` sub-commands
"""
