#!/bin/bash
# Build the guest box offline from Debian packages: a Vagrant box for the libvirt provider.
#
#   build_box.sh OUT.box BOX_ID ARCHIVE_URI SIGNED_BY PACKAGES.txt PYLIB_DIR DISK_SIZE_MB \
#                FIO_DIR GUEST_FIO BUILD_DIR...
#
# BOX_ID (the hash of the box's inputs) is written to /opt/slimio-repro/box-id in the guest:
# a cell checks it before it runs (the guest is the box it claims to be).
# ARCHIVE_URI is the Debian archive this machine's apt uses (derived, never written in the
# repository). PYLIB_DIR holds pure-Python packages for the guest (/opt/slimio-repro/python).
# FIO_DIR is rule build_fio's output (bin/fio + build.json): fio goes to the guest path
# GUEST_FIO (paths.GUEST_FIO), its build.json next to its bin/.
# Each BUILD_DIR (a built Redis: bin/ + build.json; the YCSB binding: lib/ + workloads/ +
# build.json) is baked in under /opt/slimio-repro/build with the same relative path. The box gets its own SSH key pair, written next to OUT.box as
# OUT.box.key; the Vagrantfile logs in with it (no insecure shared key). The box's kernel,
# initramfs and kernel command line go next to it too (OUT.box.vmlinuz, .initrd, .cmdline).
# The guest's SSH host key is made on its first boot (ssh-hostkeys.service), and made again
# when the key is empty: a power cut soon after the first boot (the crash campaign's VM
# testbed destroys its VM) can leave the new file empty, and sshd then refused every login
# after the restart (seen: "Failed to start ssh.service"). The unit syncs the key to disk.
#
# Steps: mmdebstrap (minbase) into a directory; a raw disk with one MBR partition at 1 MiB,
# filled by `mke2fs -d` (no partition loop devices needed); syslinux's MBR and extlinux in the
# partition; qemu-img convert to qcow2; tar with metadata.json. Needs root.
set -euo pipefail

out=$1 box_id=$2 uri=$3 signed_by=$4 packages=$5 pylib=$6 disk_mb=$7 fio_dir=$8 guest_fio=$9
shift 9
builds=("$@")
release=bookworm
work="$out.work"
rootfs="$work/rootfs"

rm -rf "$work"
mkdir -p "$work"
trap 'mountpoint -q "$rootfs/proc" && umount "$rootfs/proc"; mountpoint -q "$work/mnt" && umount "$work/mnt"; rm -rf "$work"' EXIT

include=$(grep -v '^\s*#' "$packages" | grep -v '^\s*$' | paste -sd, -)
key="[signed-by=$signed_by]"
ssh-keygen -q -t ed25519 -N '' -C slimio-repro-box -f "$work/key"

echo "== mmdebstrap ($include)"
# MODULES=list from the start (initramfs-tools' drop-in directory, no package's file): the
# kernel's and initramfs-tools' installs each generate an initramfs, which the bake below
# makes again. With every module in it, each took about 20 s here (`mmdebstrap --verbose`).
mmdebstrap --variant=minbase --include="$include" \
  --setup-hook='mkdir -p "$1/etc/initramfs-tools/conf.d"; echo MODULES=list > "$1/etc/initramfs-tools/conf.d/slimio-boot"' \
  --customize-hook='echo slimio-guest > "$1/etc/hostname"' \
  --customize-hook='printf "127.0.0.1 localhost\n127.0.1.1 slimio-guest\n" > "$1/etc/hosts"' \
  --customize-hook='printf "/dev/vda1 / ext4 defaults,noatime 0 1\n" > "$1/etc/fstab"' \
  --customize-hook='chroot "$1" useradd -m -s /bin/bash -G sudo vagrant' \
  --customize-hook='echo "vagrant ALL=(ALL) NOPASSWD: ALL" > "$1/etc/sudoers.d/vagrant"; chmod 0440 "$1/etc/sudoers.d/vagrant"' \
  --customize-hook='mkdir -p "$1/etc/systemd/network"; printf "[Match]\nType=ether\n\n[Network]\nDHCP=yes\n" > "$1/etc/systemd/network/50-dhcp.network"' \
  --customize-hook='chroot "$1" systemctl enable systemd-networkd ssh' \
  --customize-hook='printf "UseDNS no\nHostKey /etc/ssh/ssh_host_ed25519_key\n" > "$1/etc/ssh/sshd_config.d/slimio.conf"' \
  --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*; printf "[Unit]\nDescription=SSH host key\nBefore=ssh.service\nConditionFileNotEmpty=!/etc/ssh/ssh_host_ed25519_key\n[Service]\nType=oneshot\nExecStart=/bin/rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub\nExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N \"\" -f /etc/ssh/ssh_host_ed25519_key\nExecStart=/bin/sync\n[Install]\nWantedBy=multi-user.target\n" > "$1/etc/systemd/system/ssh-hostkeys.service"; chroot "$1" systemctl enable ssh-hostkeys' \
  --customize-hook='chroot "$1" systemctl mask nvmf-autoconnect.service e2scrub_reap.service modprobe@drm.service' \
  --customize-hook='chroot "$1" apt-get clean; rm -rf "$1"/var/lib/apt/lists/*' \
  "$release" "$rootfs" \
  "deb $key $uri $release main" \
  "deb $key $uri $release-updates main" \
  "deb $key $uri $release-backports main"

echo "== bake in the SSH key, Python packages, fio, Redis builds and the YCSB binding"
install -d -m 0700 -o 1000 -g 1000 "$rootfs/home/vagrant/.ssh"
install -m 0600 -o 1000 -g 1000 "$work/key.pub" "$rootfs/home/vagrant/.ssh/authorized_keys"
mkdir -p "$rootfs/opt/slimio-repro/build"
echo "$box_id" > "$rootfs/opt/slimio-repro/box-id"
cp -a "$pylib" "$rootfs/opt/slimio-repro/python"
# Bytecode compiled by the guest's own Python, once: every cell is a fresh VM, which would
# otherwise compile redis-py again on each import (about 2 s under TCG).
chroot "$rootfs" python3 -m compileall -q /opt/slimio-repro/python >/dev/null
install -D -m 0755 "$fio_dir/bin/fio" "$rootfs$guest_fio"
install -m 0644 "$fio_dir/build.json" "$rootfs$(dirname "$(dirname "$guest_fio")")/build.json"
# Runs fio inside the guest's root file system: fails here if packages.txt lacks a library
# it links (build.json's needed_libraries).
chroot "$rootfs" "$guest_fio" --version
for b in "${builds[@]}"; do
  rel=${b#*build/}
  mkdir -p "$rootfs/opt/slimio-repro/build/$rel"
  cp -a "$b/." "$rootfs/opt/slimio-repro/build/$rel/"
done
# The YCSB client's JVM (packages.txt): fails here if the JRE is missing from the guest. The
# launcher finds its libraries through /proc/self/exe ($ORIGIN), so /proc is mounted for it.
mount -t proc proc "$rootfs/proc"
chroot "$rootfs" java -version

echo "== a quick boot: a small initramfs, no modules the guest never uses"
# Under TCG every step of the boot costs: the initramfs holds only what mounts the root disk
# and the NIC (so the DHCP lease is asked for as soon as systemd-networkd starts, not after
# udev has loaded everything), and udev does not load what the testbed never uses (KVM:
# QEMU's -cpu max shows SVM; wireless; floppy; PC speaker; DRM; USB; the IDE controller).
printf '%s\n' virtio_pci virtio_blk virtio_net ext4 >> "$rootfs/etc/initramfs-tools/modules"
printf 'blacklist %s\n' kvm kvm_amd kvm_intel ccp cfg80211 floppy pcspkr drm \
  usbcore uhci_hcd ehci_hcd ata_piix ata_generic > "$rootfs/etc/modprobe.d/slimio-boot.conf"
chroot "$rootfs" update-initramfs -u -k all
umount "$rootfs/proc"
chroot "$rootfs" dpkg-query -W -f '${Package}\t${Version}\n' > "$work/packages.tsv"
kernel=$(basename "$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -1)")
initrd="initrd.img-${kernel#vmlinuz-}"
mkdir -p "$rootfs/boot/extlinux"
# nvme_core.multipath=N: QEMU's NVMe subsystem reports multi-controller capability, which
# would make nvme0n1 a bio-based multipath head (no I/O scheduler to set). Without native
# multipath the namespace is a plain blk-mq disk, like the paper's SSD.
# tsc=reliable: under TCG the kernel's TSC synchronisation check fails (the two vCPUs are
# emulated, so its timing is off) and it falls back to the HPET, whose every read is an
# emulated MMIO access outside the vDSO: 11-15 % of redis-server's samples in the VM bench
# (`slimio-repro bench --testbed vm --profile`, read_hpet), for every system. QEMU's TCG
# TSC is the host's (invariant, one clock for both vCPUs), so the guest can trust it.
cmdline="root=/dev/vda1 rw console=ttyS0,115200 net.ifnames=0 nvme_core.multipath=N tsc=reliable quiet"
cat > "$rootfs/boot/extlinux/extlinux.conf" <<CONF
DEFAULT linux
TIMEOUT 0
PROMPT 0
LABEL linux
  LINUX /boot/$kernel
  INITRD /boot/$initrd
  APPEND $cmdline
CONF
# The same kernel, initramfs and command line next to the box: the testbed boots them
# directly (QEMU loads them; no firmware disk reads or boot loader, slow under TCG).
install -m 0644 "$rootfs/boot/$kernel" "$out.vmlinuz"
install -m 0644 "$rootfs/boot/$initrd" "$out.initrd"
echo "$cmdline" > "$out.cmdline"

echo "== disk image"
disk="$work/disk.raw"
truncate -s "${disk_mb}M" "$disk"
printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk -q "$disk"
part_bytes=$(( disk_mb * 1048576 - 1048576 ))
mke2fs -q -t ext4 -L slimio-root -d "$rootfs" -E offset=1048576 "$disk" "$(( part_bytes / 1024 ))k"
dd if=/usr/lib/syslinux/mbr/mbr.bin of="$disk" bs=440 count=1 conv=notrunc status=none
mkdir -p "$work/mnt"
mount -o loop,offset=1048576 "$disk" "$work/mnt"
extlinux --install "$work/mnt/boot/extlinux" >/dev/null
umount "$work/mnt"
qemu-img convert -O qcow2 "$disk" "$work/box.img"
rm -f "$disk"

echo "== box"
cat > "$work/metadata.json" <<META
{"provider": "libvirt", "format": "qcow2", "virtual_size": $(( (disk_mb + 1023) / 1024 ))}
META
cat > "$work/Vagrantfile" <<'VF'
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |libvirt|
    libvirt.disk_bus = "virtio"
  end
end
VF
tar -C "$work" -cf "$out.partial" metadata.json Vagrantfile box.img
cp "$work/packages.tsv" "$out.packages.tsv"
install -m 0600 "$work/key" "$out.key"
echo "kernel=${kernel#vmlinuz-}" > "$out.kernel"
mv "$out.partial" "$out"
echo "== $out: $(du -h "$out" | cut -f1)"
