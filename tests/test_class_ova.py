"""The OVA for students' laptops (deploy/make-ova): on a tiny generated example, the archive has the
shape DSP0243 gives an OVA (descriptor, manifest, then the referenced files, ustar) and the OVF 1.0
descriptor the shape of its schema: sections in order with their Info first, every reference
resolved, the CIM RASD fields of each Item in the schema's (alphabetical) sequence, the hardware
VirtualBox's import maps (2 vCPUs, 2048 MiB, AHCI, E1000 on NAT, Debian 64-bit)."""

import hashlib
import importlib.machinery
import importlib.util
import tarfile
import xml.etree.ElementTree as ET

import pytest

from support import REPO

OVF = "{http://schemas.dmtf.org/ovf/envelope/1}"
RASD = "{http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData}"
VSSD = "{http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData}"
VMW = "{http://www.vmware.com/schema/ovf}"
# CIM_ResourceAllocationSettingData.xsd: the element sequence (alphabetical)
RASD_SEQUENCE = ["Address", "AddressOnParent", "AllocationUnits", "AutomaticAllocation", "AutomaticDeallocation",
                 "Caption", "Connection", "ConsumerVisibility", "Description", "ElementName", "HostResource",
                 "InstanceID", "Limit", "MappingBehavior", "OtherResourceType", "Parent", "PoolID", "Reservation",
                 "ResourceSubType", "ResourceType", "VirtualQuantity", "VirtualQuantityUnits", "Weight"]


def make_ova():
    loader = importlib.machinery.SourceFileLoader("make_ova", str(REPO / "deploy" / "make-ova"))
    spec = importlib.util.spec_from_loader("make_ova", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture
def example(tmp_path):
    """A tiny appliance: two small files standing in for the VMDKs (what qemu-img writes is its own
    business; the descriptor and the archive are labkit's)."""
    tool = make_ova()
    disks = [tmp_path / "student-07-disk1.vmdk", tmp_path / "student-07-cidata.vmdk"]
    disks[0].write_bytes(b"KDMV" + bytes(1020))
    disks[1].write_bytes(b"KDMV" + b"\x01" * 508)
    text = tool.descriptor("student-07", [(d.name, d.stat().st_size, c) for d, c in zip(disks, (6 << 30, 504 << 20))],
                           2, 2048, "efi")
    ova = tmp_path / "student-07.ova"
    tool.pack(ova, "student-07", text, disks, mtime=1700000000)
    return tool, ova, disks


def test_the_archive_is_descriptor_manifest_then_files(example):
    tool, ova, disks = example
    with tarfile.open(ova) as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["student-07.ovf", "student-07.mf", disks[0].name, disks[1].name]
        assert all(m.isfile() and m.uid == 0 and m.mtime == 1700000000 for m in members)
        data = {m.name: tar.extractfile(m).read() for m in members}
    assert open(ova, "rb").read()[257:262] == b"ustar"
    manifest = dict(line.split("= ") for line in data["student-07.mf"].decode().splitlines())
    assert manifest == {f"SHA256({name})": hashlib.sha256(data[name]).hexdigest()
                        for name in ("student-07.ovf", disks[0].name, disks[1].name)}
    # the same inputs, the same bytes
    again = ova.with_name("again.ova")
    tool.pack(again, "student-07", data["student-07.ovf"].decode(), disks, mtime=1700000000)
    assert again.read_bytes() == ova.read_bytes()


def test_the_descriptor_has_the_ovf_schemas_shape(example):
    _, ova, disks = example
    with tarfile.open(ova) as tar:
        sizes = {m.name: m.size for m in tar.getmembers()}
        envelope = ET.fromstring(tar.extractfile("student-07.ovf").read())
    assert envelope.tag == f"{OVF}Envelope" and envelope.get(f"{OVF}version") == "1.0"
    assert [child.tag for child in envelope] == [f"{OVF}References", f"{OVF}DiskSection", f"{OVF}NetworkSection",
                                                 f"{OVF}VirtualSystem"]
    files = {f.get(f"{OVF}id"): f for f in envelope.find(f"{OVF}References")}
    assert [f.get(f"{OVF}href") for f in files.values()] == [d.name for d in disks]
    assert all(int(f.get(f"{OVF}size")) == sizes[f.get(f"{OVF}href")] for f in files.values())
    disk_section = envelope.find(f"{OVF}DiskSection")
    assert disk_section[0].tag == f"{OVF}Info"
    found = {d.get(f"{OVF}diskId"): d for d in disk_section.findall(f"{OVF}Disk")}
    assert [d.get(f"{OVF}fileRef") for d in found.values()] == list(files)
    assert [int(d.get(f"{OVF}capacity")) for d in found.values()] == [6 << 30, 504 << 20]
    assert {d.get(f"{OVF}format") for d in found.values()} == {
        "http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"}
    networks = envelope.find(f"{OVF}NetworkSection")
    assert networks[0].tag == f"{OVF}Info"
    names = [n.get(f"{OVF}name") for n in networks.findall(f"{OVF}Network")]

    system = envelope.find(f"{OVF}VirtualSystem")
    assert [c.tag for c in system] == [f"{OVF}Info", f"{OVF}Name", f"{OVF}OperatingSystemSection",
                                       f"{OVF}VirtualHardwareSection"]
    assert system.get(f"{OVF}id") == "student-07"
    os_section = system.find(f"{OVF}OperatingSystemSection")
    assert os_section[0].tag == f"{OVF}Info" and os_section.get(f"{OVF}id") == "96"     # Debian 64-Bit
    hardware = system.find(f"{OVF}VirtualHardwareSection")
    assert [c.tag for c in hardware][:2] == [f"{OVF}Info", f"{OVF}System"]
    assert [c.tag.split("}")[1] for c in hardware.find(f"{OVF}System")] == [
        "ElementName", "InstanceID", "VirtualSystemIdentifier", "VirtualSystemType"]
    items = hardware.findall(f"{OVF}Item")
    assert [c.tag for c in hardware][2:] == [f"{OVF}Item"] * len(items) + [f"{VMW}Config"]
    fields = []
    for item in items:
        assert all(c.tag.startswith(RASD) for c in item)
        keys = [c.tag[len(RASD):] for c in item]
        assert keys == sorted(keys, key=RASD_SEQUENCE.index), keys
        fields.append({key: item.find(RASD + key).text for key in keys})
    ids = [f["InstanceID"] for f in fields]
    assert len(set(ids)) == len(ids)
    by_type = {}
    for f in fields:
        by_type.setdefault(f["ResourceType"], []).append(f)
        if "Parent" in f:
            assert f["Parent"] in ids
        if "HostResource" in f:
            assert f["HostResource"].removeprefix("ovf:/disk/") in found
        if "Connection" in f:
            assert f["Connection"] in names
    assert [f["VirtualQuantity"] for f in by_type["3"]] == ["2"]
    assert [(f["VirtualQuantity"], f["AllocationUnits"]) for f in by_type["4"]] == [("2048", "byte * 2^20")]
    assert [f["ResourceSubType"] for f in by_type["20"]] == ["AHCI"]
    controller = by_type["20"][0]["InstanceID"]
    assert [(f["HostResource"], f["Parent"], f["AddressOnParent"]) for f in by_type["17"]] == [
        ("ovf:/disk/vmdisk1", controller, "0"), ("ovf:/disk/vmdisk2", controller, "1")]
    assert [(f["ResourceSubType"], f["Connection"]) for f in by_type["10"]] == [("E1000", "NAT")]
    config = hardware.find(f"{VMW}Config")
    assert (config.get(f"{VMW}key"), config.get(f"{VMW}value"), config.get(f"{OVF}required")) == \
        ("firmware", "efi", "false")


def test_bios_or_efi_only(example):
    tool = example[0]
    assert 'vmw:key="firmware" vmw:value="bios"' in tool.descriptor("x", [("x.vmdk", 1, 1)], 2, 2048, "bios")
    with pytest.raises(ValueError, match="firmware: bios or efi"):
        tool.descriptor("x", [("x.vmdk", 1, 1)], 2, 2048, "uefi")
