"""scripts/harness/workshop.py's own helpers (the booted proof itself is scripts/test-workshop)."""

import importlib.util
import sys

from support import REPO


def harness():
    spec = importlib.util.spec_from_file_location("workshop_harness", REPO / "scripts" / "harness" / "workshop.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_failed_vagrant_command_reports_the_exception_not_the_end_of_its_backtrace():
    """An unexpected Ruby exception in vagrant ends its output with a backtrace of a hundred
    frames; the message is on its first line, and the report keeps it."""
    workshop = harness()
    frames = "".join(f"\tfrom /usr/share/rubygems-integration/all/gems/vagrant-2.3.4/lib/vagrant/frame{i}.rb:{i}:in `call'\n"
                     for i in range(100))
    output = ("Bringing machine 'student-01' up with 'libvirt' provider...\n"
              "/usr/share/rubygems-integration/all/gems/vagrant-libvirt-0.11.2/lib/vagrant-libvirt/action/"
              "wait_till_up.rb:40:in `call': the message that says why (Libvirt::Error)\n" + frames)
    reported = workshop.tail(workshop.without_backtrace(output), 3000)
    assert "the message that says why (Libvirt::Error)" in reported
    assert "Bringing machine 'student-01' up" in reported
    assert "\tfrom " not in reported
    # what was reported before: the backtrace's last 3000 characters, without the message
    assert "the message that says why" not in workshop.tail(output, 3000)
