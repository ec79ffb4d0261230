# The documentation twin of the guest CPU settings (plugins/module_utils/guest_cpu.py), for the
# inventory plugin berth.fleet.hypervisors (fleet-wide; each hypervisor may set its own).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  cpu_mode:
    description:
      - The CPU the fleet's guests get (Nova's C([libvirt] cpu_mode)); a hypervisor may set its own
        C(cpu_mode), C(cpu_models) and C(cpu_model_extra_flags) in O(hypervisors), which then
        replace these three for it.
      - V(host-model) is the host's CPU as a named model with its features, as libvirt expands it
        (under plain QEMU emulation, domain type C(qemu), the most the emulator offers);
        V(host-passthrough) is the host's CPU itself (it needs kvm, so it is refused for C(qemu) domains);
        V(custom) is the first of O(cpu_models) the host can run; V(none) is QEMU's own default CPU.
      - V(group-baseline) is the CPU baseline of the host's aggregate listed in
        C(berth_cpu_baseline_groups) (M(berth.fleet.tracker_sync)'s
        O(berth.fleet.tracker_sync#module:cpu_baseline_groups)), a custom model and features every
        member of the group can run, which C(gather.yml) computes and records, so that the guests
        can live-migrate anywhere in the group. Not with O(cpu_model_extra_flags). A launch on a
        host without a recorded baseline for its domain type is refused there, naming the host.
      - Not set, Nova's default for kvm and qemu guests, V(host-model); where a host's libvirt says
        a domain type has no host-model CPU, its guests get V(none) instead.
      - Each sync records what the host's libvirt says each domain type can run (its domain
        capabilities); a launch on a host that cannot run its settings is refused there, naming
        the host and the setting, and tried on the next alternate. Every guest keeps the CPU it
        was built with when it moves (live, cold or resized).
    type: str
    choices: [host-model, host-passthrough, custom, none, group-baseline]
  cpu_models:
    description:
      - With O(cpu_mode=custom) (and only then, as in Nova), libvirt CPU model names in order of
        preference (case-insensitive, such as V(Nehalem) or V(EPYC-Rome)); a guest gets the first
        one the host's libvirt marks usable for its domain type.
    type: list
    elements: str
  cpu_model_extra_flags:
    description:
      - CPU features added to the guest's model (V(pcid) or V(+pcid)) or taken off it (V(-pcid)),
        as Nova's C(cpu_model_extra_flags); not with V(none). A custom model with its features is
        compared with the host's CPU through libvirt before the guest is defined there, and
        refused naming the features it lacks.
    type: list
    elements: str
"""
