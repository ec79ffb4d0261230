# The limits of every size, for the modules that take a flavor or a bounded option: the text of
# plugins/module_utils/limits.py's doc_notes(), which states and checks them. A unit test keeps the
# two equal (ansible-test reads a fragment's DOCUMENTATION as a literal string, not a call).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
notes:
  - >-
    Every size is bounded and checked before anything is written (nothing is decided, claimed or
    recorded); the error names the field and its range, as in "flavor.memory_mb: 1000000000000 is over
    the limit of 4194304 MiB (4 TiB)". The limits, where a module takes the field:
  - >-
    C(flavor.vcpus): 1 to 1024 vCPUs. Why: KVM starts no x86-64 guest with more (KVM_CAP_MAX_VCPUS is
    1024 since Linux 5.15); QEMU's own machine types may allow fewer (Debian 12's QEMU 7.2: 288 on q35,
    255 on pc).
  - >-
    C(flavor.memory_mb): 1 to 4194304 MiB (4 TiB). Why: more than all but the largest hypervisors hold,
    and far inside the ledger's 32-bit columns when summed over a hypervisor's instances.
  - >-
    C(flavor.root_gb): 0 to 16384 GiB (16 TiB). Why: the disk is a file in the storage pool; ext4, the
    usual filesystem of a directory pool, holds no file over 16 TiB.
  - >-
    C(flavor.ephemeral_gb): 0 to 16384 GiB (16 TiB). Why: the disk is a file in the storage pool; ext4,
    the usual filesystem of a directory pool, holds no file over 16 TiB.
  - >-
    C(flavor.swap): 0 to 16777216 MiB (16 TiB). Why: the disk is a file in the storage pool; ext4, the
    usual filesystem of a directory pool, holds no file over 16 TiB.
  - >-
    C(count): 1 to 1000 instances. Why: a launch decides, claims and records all its instances in one
    transaction and one decision.
  - >-
    C(lease_seconds): 1 to 604800 seconds. Why: a week outlasts any build, image uploads included; a
    dead build's claim is held that long before a sync releases it.
  - >-
    C(service_down_time): 1 to 31536000 seconds. Why: a hypervisor not heard from for a year is no
    longer fit to schedule on.
  - >-
    C(max_attempts): 1 to 100 hosts. Why: each instance's alternates (max_attempts - 1 hosts) are
    recorded with its decision.
  - >-
    C(max_server_per_host): 1 to 1000 instances. Why: as many as one launch places.
  - >-
    C(image_max_mb): 1 to 16777216 MiB (16 TiB). Why: the disk is a file in the storage pool; ext4, the
    usual filesystem of a directory pool, holds no file over 16 TiB.
  - >-
    C(decisions): 0 to 1000 decisions. Why: each decision is read whole, with up to 100 host states, and
    explained on the page.
  - >-
    C(decisions_max_age_days): 1 to 3650 days. Why: decisions are kept to explain and replay launches,
    not as an archive.
  - >-
    C(decisions_max_count): 1 to 1000000 decisions. Why: each keeps up to 100 host states (a few KiB
    each): a million is already gigabytes.
  - >-
    C(lines): 1 to 1000 lines. Why: they come from the last 65536 bytes (64 KiB) of the serial log at
    most, which hold about 1000 lines of a boot log.
  - >-
    C(size_gb): 1 to 16384 GiB (16 TiB). Why: the disk is a file in the storage pool; ext4, the usual
    filesystem of a directory pool, holds no file over 16 TiB.
  - >-
    C(flavor.name): at most 255 characters. Why: the ledger records it with each instance (a
    255-character column).
  - >-
    C(flavor.extra_specs): at most 255 characters. Why: Nova's limit for extra spec keys and values.
  - >-
    C(metadata): at most 128 items, keys of at most 64 characters, values of at most 1024 characters.
    Why: Nova's default quota of metadata items per instance; kept in the domain's XML, which every read
    of the domain carries.
  - >-
    C(user_data): at most 65536 bytes (64 KiB). Why: about Nova's limit for user data (65535 bytes,
    base64-encoded there); it goes on a small NoCloud seed ISO.
  - >-
    C(ssh_authorized_keys): at most 64 keys (with C(key_name)'s), each of at most 8192 characters. Why:
    each is a line of the guest's authorized_keys, carried on its small NoCloud seed; an RSA key of
    16384 bits, the largest OpenSSH makes, is under 3 KiB with its comment.
  - >-
    C(networks[<index>].addresses): at most 16 addresses. Why: static addresses of one interface,
    carried on the guest's NoCloud seed.
  - >-
    C(networks[<index>].routes): at most 64 routes. Why: static routes of one interface, carried on the
    guest's NoCloud seed.
  - >-
    C(networks[<index>].nameservers.addresses): at most 3 addresses. Why: the C library's resolver reads
    3 name servers (MAXNS) and ignores the rest.
  - >-
    C(networks[<index>].nameservers.search): at most 6 domains. Why: the classic limit of resolv.conf's
    search list, which older resolvers still keep.
  - >-
    C(scheduler_hints), C(image_properties), C(image.properties): at most 65536 bytes as JSON (64 KiB),
    nested at most 32 levels of lists and mappings deep (C(scheduler_hints.query) too, as JSON text).
    Why: recorded with every decision of the launch, so it can be replayed; Python's json module and the
    query hint's evaluation recurse once per level, and Python stops at about 1000 (a RecursionError
    that would fail the run uncaught); no hint or property needs more than a few.
  - >-
    Any dict or list option given as JSON text (as an AWX survey gives it): nested at most 32 levels of
    lists and mappings deep, counted before the text is decoded. Why: Python's json module recurses once
    per level and stops at about 1000 (a RecursionError that would fail the run uncaught), and a
    survey's answer of 65536 characters holds 30000 levels; no option nests more than a few.
  - >-
    Names of server groups, projects, availability zones: at most 255 characters. Why: the ledger's name
    columns hold 255 characters.
  - >-
    A hypervisor whose facts do not fit the ledger (vCPUs, memory or disk beyond these: 8192 CPUs,
    67108864 MiB (64 TiB), 1048576 GiB (1 PiB); total x allocation ratio beyond 2^30 per resource;
    domains using beyond 2^30 - 1 in all) is recorded as down by the tracker sync, with the reason, and
    never scheduled on.
"""
