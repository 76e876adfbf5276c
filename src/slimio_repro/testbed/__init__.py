"""The testbed stage (driven by workflows/rules/testbed.smk): the guest box, the KVM probe,
the vm testbed's per-cell VMs (Vagrant + libvirt, an emulated NVMe FDP SSD), and where a
VM's host CPU goes (hostcpu)."""

from . import accel, box, hostcpu, vm

__all__ = ["accel", "box", "hostcpu", "vm"]
