#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: tracker_sync
short_description: Record hypervisors' states in Berth's ledger and reconcile them with the domains found
version_added: 0.1.0
description:
  - Berth's ResourceTracker update, run by C(playbooks/gather.yml) (schedule it in AWX or cron,
    every few minutes). One task syncs every hypervisor of O(hosts) - gather.yml gives it the
    play's hosts (C(ansible_play_batch)) and runs it once - so C(--limit) and AWX job slicing
    sync part of the fleet, and a run only ever writes the hypervisors it syncs, so slices may run
    at once (on PostgreSQL, several controllers too). Without O(hosts) it syncs the task's own
    host, as an ordinary per-host task.
  - For each host, takes the C(berth_host_state) the P(berth.fleet.hypervisors#inventory)
    inventory plugin gathered, or, where the source has C(gather_facts=false), gathers it now
    from the controller through the host's C(berth_libvirt_uri), with the settings, aggregates
    and zone the source gives it (C(berth_hypervisor)). O(workers) hypervisors are read at
    once, on threads of the controller; each is written as soon as it is read, O(batch_size)
    per ledger transaction. Credentials come from the environment (C(BERTH_LIBVIRT_USERNAME),
    C(BERTH_LIBVIRT_PASSWORD)).
  - A hypervisor whose connection or any libvirt call does not answer within its C(timeout)
    (of the inventory source), or whose whole reading takes more than twice that, is marked
    C(down) with the reason and keeps its last synced state; launches skip it, and skip as
    stale any hypervisor not synced for O(service_down_time) seconds. It never holds up the
    others - its reading thread is given up and another takes its place.
  - So is a hypervisor whose answers do not read (XML that does not parse, a number that is
    none, sizes the ledger cannot hold) or do not fit its settings; a hypervisor is not trusted,
    and what one answers never stops the sync of the others. The reason is printable and at
    most 400 characters, whatever the host sent.
  - Then, in the batch's transaction of the ledger, writes each hypervisor's capacity (totals,
    reserved amounts, allocation ratios), the URI launches build through, its facts (zone,
    aggregates, capabilities, metrics), the images of its pool (and why one would be refused,
    such as a link leading out of the pool) and its libvirt networks, keyed by its libvirt
    host UUID; records the domains the ledger does not know (orphans) as unmanaged usage and
    forgets those gone; flags instances placed there (ACTIVE, STOPPED, PAUSED) whose domain is
    not there (C(missing_since)) and clears the flag when it is back; makes each placed
    instance's state follow its domain's power state (running is ACTIVE, paused PAUSED, shut
    off or crashed STOPPED; a guest that powered itself off becomes STOPPED, as Nova's
    power-state sync makes it), except an instance changed in the ledger after the facts were
    gathered or one with a move or resize under way, and reports each such change as drift
    (nothing is done to the domain, and the claims stay). The hypervisor's generation moves
    when its capacity or usage does.
  - Incremental - a hypervisor whose state did not change only has its sync time moved (one
    statement for all of them); its row, facts, images, networks and unmanaged usage are not
    rewritten, and its generation stays.
  - Settles the claims whose lease has expired (the run that held them died) - a BUILDING
    instance whose domain runs there got as far as starting it, so its build is finished
    (ACTIVE); any other BUILDING instance's build is dead, its claim is released and it becomes
    ERROR, and what it left there is recorded. A moving instance's claim is released when its
    domain is not there. A claim whose lease has not expired is never touched.
  - Then reclaims what dead builds left on the hypervisors. A build records each volume (root
    disk, cloud-init seed) and its domain in the ledger before it makes them; those whose
    instance no longer holds a claim on this hypervisor - its build died, failed here and moved
    on, or the instance was deleted or replaced by a relaunch - are removed through libvirt (the
    domain first) and then forgotten, unless O(keep_leftovers). A domain that runs is never
    stopped here. Volumes named as Berth names a build's (C(berth-<uuid>-...)) that nothing
    recorded and no claim holds are reported as orphan volumes and left alone (another ledger's,
    or older than the records). If the run dies halfway, the next sync finishes the work.
  - Freshness - a hypervisor counts as down unless the interval between two syncs plus the
    duration of a sync stays below O(service_down_time); the task warns when its own duration
    reaches half of it, and returns it (C(summary.duration_s), C(summary.per_1000_s)).
  - With O(mark_missing) (once per run, C(run_once)) it does the other step instead - the
    hypervisors of the ledger that the inventory does not list at all (O(hypervisor_group) of
    the whole inventory, which C(--limit) does not narrow) and that nothing has synced for
    O(service_down_time) seconds are marked C(missing) and reported; one another slice or
    controller synced lately is left as it is. Nothing is ever retired here, and claims stay -
    M(berth.fleet.hypervisor) with C(state=retired) drops them.
  - That step also keeps the record of scheduling decisions bounded - decisions older than
    O(decisions_max_age_days) days, and those beyond the newest O(decisions_max_count), are
    deleted (C(decisions_pruned) says how many). Each decision keeps at most 100 host states
    (the chosen hosts, their alternates, then the runners-up and closest misses).
  - Returns a drift report - a summary line, then the lines of every hypervisor with something
    to report (in C(drift)); each hypervisor's own lines, the ledger's usage beside the
    hypervisor's own view and each finding, in C(findings).
options:
  hosts:
    description:
      - The inventory hosts (hypervisors of a P(berth.fleet.hypervisors#inventory) source) to
        sync in this one task; C(playbooks/gather.yml) passes C(ansible_play_batch) and runs the
        task once.
      - Without it, the task's own host.
    type: list
    elements: str
  workers:
    description:
      - How many hypervisors are read at once, each on a thread of the controller (like Ansible's
        C(forks), for this task alone). C(playbooks/gather.yml) takes it from C(berth_sync_workers).
      - Reading a remote hypervisor mostly waits for the network, so more workers than CPUs pay
        off; each holds one libvirt connection while it reads.
    type: int
    default: 20
  batch_size:
    description:
      - How many hypervisors are written per ledger transaction (each a few set-based statements
        for the whole batch). C(playbooks/gather.yml) takes it from C(berth_sync_batch_size).
    type: int
    default: 500
  mark_missing:
    description: Instead of syncing, mark the ledger's hypervisors that the inventory does not list as missing.
    type: bool
    default: false
  hypervisor_group:
    description: The inventory group of the hypervisors (for O(mark_missing)).
    type: str
    default: hypervisors
  keep_leftovers:
    description:
      - Keep what dead builds left (volumes, domains) for inspection instead of removing it; the
        drift report still lists it. C(playbooks/gather.yml) takes it from the inventory
        variable C(berth_keep_leftovers). C(delete.yml) of the instance removes it anyway.
    type: bool
    default: false
  cpu_baseline_groups:
    description:
      - Aggregates (of the O(berth.fleet.hypervisors#inventory:aggregates) option of the inventory
        source) whose members get a CPU baseline. The sync computes, with libvirt's
        C(virConnectBaselineHypervisorCPU) on one member's connection, the CPU model and
        features every member's host-model CPU can run, for each domain type all of them offer
        a host-model CPU for, and records it on each member. A hypervisor whose C(cpu_mode) is
        C(group-baseline) defines its guests with that CPU, so that they can live-migrate
        anywhere in the group.
      - The recorded baseline is kept while the group's members are those it was computed from,
        and computed again once they differ and all of them answer. Every sync compares it with
        what each answering member can give a guest; the drift report names a member that
        cannot run it, with libvirt's reason. A hypervisor may be in one such aggregate only.
      - C(playbooks/gather.yml) takes it from C(berth_cpu_baseline_groups).
    type: list
    elements: str
    default: []
  decisions_max_age_days:
    description:
      - With O(mark_missing), delete the scheduling decisions recorded more than this many days
        ago. C(playbooks/gather.yml) takes it from C(berth_decisions_max_age_days).
    type: int
    default: 30
  decisions_max_count:
    description:
      - With O(mark_missing), keep at most this many decisions, the newest. C(playbooks/gather.yml)
        takes it from C(berth_decisions_max_count).
    type: int
    default: 10000
  service_down_time:
    description:
      - Seconds after its last sync that a hypervisor counts as down to the scheduler
        (M(berth.fleet.schedule)'s O(berth.fleet.schedule#module:service_down_time)); the sync
        warns when its own duration reaches half of it. With O(mark_missing), the age after
        which a hypervisor the inventory does not list counts as missing.
    type: int
    default: 600
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Works out the whole reconciliation and reports it; writes nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
# playbooks/gather.yml
- name: Record each hypervisor's state in the ledger
  hosts: hypervisors
  gather_facts: false
  tasks:
    - name: Sync the hypervisors into the ledger
      berth.fleet.tracker_sync:
        hosts: "{{ ansible_play_batch }}"
        workers: 20
      register: sync
      run_once: true

    - name: Drift report
      ansible.builtin.debug:
        msg: "{{ sync.drift }}"
      run_once: true

    - name: Mark the hypervisors that no inventory lists as missing
      berth.fleet.tracker_sync:
        mark_missing: true
      run_once: true
"""

RETURN = r"""
drift:
  description:
    - The drift report as the play prints it - a summary line (how many synced, changed, unchanged,
      down, with findings; the duration and the seconds per 1,000 hypervisors), then the lines of
      every hypervisor that is not in step. With O(mark_missing), one line per missing hypervisor.
  returned: always
  type: list
  elements: str
ledger_created:
  description: >-
    The URL (password masked) of the SQLite ledger this sync created because its file did not
    exist yet, else null. The drift report's first line says so too.
  returned: unless O(mark_missing)
  type: str
decisions_pruned:
  description: With O(mark_missing), how many scheduling decisions were deleted (in check mode, would be).
  returned: with O(mark_missing)
  type: int
  sample: 12
findings:
  description: Each synced hypervisor's lines - the ledger's view beside the hypervisor's own, then each finding about it.
  returned: unless O(mark_missing)
  type: dict
summary:
  description: >-
    The figures of the summary line - hypervisors, changed, down, with_findings, duration_s, per_1000_s,
    workers, batch_size, and imbalance (the fleet's imbalance figure after the sync, as
    M(berth.fleet.rebalance) reads it).
  returned: unless O(mark_missing)
  type: dict
report:
  description: The findings as data.
  returned: always
  type: dict
  contains:
    hypervisors: {description: "The synced hypervisors that answered - host, uuid, generation, changed, orphans.", type: list, elements: dict}
    down: {description: "Those the ledger knew that did not answer - host, uuid, reason, last_synced_at.", type: list, elements: dict}
    missing_instances: {description: "Instances placed there (ACTIVE, STOPPED, PAUSED) whose domain is not on the hypervisor.",
                        type: list, elements: dict}
    power_states:
      description: >-
        Instances whose state in the ledger now follows their domain's power state - name, uuid, host, was,
        domain_state, now (ACTIVE, STOPPED or PAUSED).
      type: list
      elements: dict
    found_again: {description: Instances flagged missing before whose domain is back., type: list, elements: dict}
    released_claims: {description: "Expired claims released (no running domain), each with instance_name.", type: list, elements: dict}
    kept_expired_claims: {description: 'Expired claims kept, each with why.', type: list, elements: dict}
    finished_builds: {description: "Expired claims of BUILDING instances whose domain runs - the instance is ACTIVE now.", type: list, elements: dict}
    finished_evacuations:
      description: "Expired claims of evacuations whose domain runs on the destination while the instance's old host is
        fenced - the evacuation died before its last word; the instance is ACTIVE there now."
      type: list
      elements: dict
    leftovers:
      description:
        - What dead builds left on the hypervisors, one entry per instance - host, instance_uuid,
          instance_name, why (what became of the instance), items (the recorded artefacts - kind
          C(domain) or C(volume), pool, name, present), running (its domain runs), outcome
          (V(removed), V(would remove), V(kept), V(running), V(failed)), removed (the items
          removed), error.
      type: list
      elements: dict
    orphan_volumes: {description: "Volumes named as a build's that no claim holds and nothing recorded - host, pool, name.", type: list, elements: dict}
    unrecorded_volumes:
      description: Volumes named as berth.fleet.volume names data volumes that no volume of the ledger is - host, pool,
        name (reported, never removed).
      type: list
      elements: dict
    missing: {description: "With O(mark_missing) - hypervisors marked missing.", type: list, elements: dict}
    synced_elsewhere: {description: "With O(mark_missing) - hypervisors the inventory does not list but something synced lately.", type: list, elements: dict}
"""
