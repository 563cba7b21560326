"""deploy/settle-inode-times: two ext4 images made by `mkfs.ext4 -d` from two copies of one tree,
written at different moments (so their change and access times differ), are byte-identical once
their inode times are settled — also when the file system sits at an offset in a disk image, as in
scripts/build-box --cloud. A small tree with files, a hard link, a symlink, nested and empty
directories and a name with spaces and quotes stands in for the image's root."""

import os
import subprocess
import time

from support import REPO

TOOL = REPO / "deploy" / "settle-inode-times"
WHEN = 1700000000
UUID = "11111111-2222-3333-4444-555555555555"
OFFSET = 1 << 20


def tree(root):
    (root / "etc" / "deep" / "er").mkdir(parents=True)
    (root / "empty").mkdir()
    for i in range(40):
        (root / "etc" / f"file{i}").write_text(f"{i}\n")
    (root / "etc" / "deep" / 'a "quoted" name with spaces').write_text("x\n")
    os.link(root / "etc" / "file1", root / "etc" / "deep" / "er" / "hardlink")
    os.symlink("../file2", root / "etc" / "deep" / "link")
    for path in [root, *root.rglob("*")]:
        os.utime(path, (WHEN, WHEN), follow_symlinks=False)


def image(tmp_path, name, *, settle: bool) -> bytes:
    root = tmp_path / name
    root.mkdir()
    tree(root)
    disk = tmp_path / f"{name}.img"
    with open(disk, "wb") as f:
        f.truncate(OFFSET + (16 << 20))
    env = {**os.environ, "E2FSPROGS_FAKE_TIME": str(WHEN)}
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", root, "-U", UUID, "-E", f"offset={OFFSET},hash_seed={UUID}",
                    disk, "16384k"], check=True, env=env)
    if settle:
        done = subprocess.run([TOOL, f"{disk}?offset={OFFSET}", str(WHEN)], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "inodes" in done.stdout
    return disk.read_bytes()


def test_two_builds_of_one_tree_are_byte_identical_once_settled(tmp_path):
    first = image(tmp_path, "a", settle=True)
    time.sleep(1.1)         # the second copy's change times a whole second later
    second = image(tmp_path, "b", settle=True)
    assert first == second


def test_without_settling_the_inode_times_differ(tmp_path):
    """The reason for the tool: the same two builds differ when it is not run."""
    first = image(tmp_path, "a", settle=False)
    time.sleep(1.1)
    assert first != image(tmp_path, "b", settle=False)


def test_usage_and_a_missing_image_are_refused(tmp_path):
    usage = subprocess.run([TOOL, "only-one-argument"], capture_output=True, text=True)
    assert usage.returncode == 2 and "IMAGE" in usage.stderr
    missing = subprocess.run([TOOL, str(tmp_path / "nothing.img"), str(WHEN)], capture_output=True, text=True)
    assert missing.returncode == 1 and "nothing.img" in missing.stderr
