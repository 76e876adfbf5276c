"""The testbed stage (driven by workflows/rules/testbed.smk): the guest box, the KVM probe,
and the vm testbed's per-cell VMs (Vagrant + libvirt, an emulated NVMe FDP SSD)."""

from . import accel, box, vm

__all__ = ["accel", "box", "vm"]
