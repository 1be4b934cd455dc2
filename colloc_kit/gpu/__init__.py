"""The hardware: everything that talks to NVML, the MPS control daemon or MIG. The sharing modes (`colloc_kit.modes`)
and the monitor build on it; nothing here knows about runs, jobs or notebooks.

    nvml           the one door to NVML (real pynvml or a stand-in), `Reading`s, a small `Device`
    pids           process utilities: pid files, alive, wait, kill
    mps_detect     which MPS daemons run here, which block a run, and the refusal that says how to stop them
    mps_daemon     one private MPS control daemon: started, handed to jobs, always shut down
    mps_watchdog   the watchdog and subreaper that keep a daemon from outliving the kit
    mig_catalogue  MIG profile tables of each GPU model, names resolved
    mig_live       the live catalogue: a GPU's own MIG profiles and placements, read through NVML
    mig_planner    exact MIG placements (`plan`), explained impossibilities, proposed layouts
    mig_apply      `MigLayout`: apply a layout and restore what was there (an undo journal)
    mig_read       a GPU's MIG state read through NVML (`read_state`: mode, instances, MIG device UUIDs), MIG access
    mig_state      a simulated MIG GPU and its host: modes, placement and capacity of GPU instances, refusals
    mig_instances  inside a simulated MIG GPU: GPU and compute instances, the processes on them, their rules
    mig_handles    the simulated NVML's handles: ctypes structures, each a key into a table of `mig_state` objects
    mig_simulator  a simulated NVML over `mig_state`: pynvml's functions, handles, structures and errors
    mig_instance_calls  the simulated NVML's GPU-instance and compute-instance functions (`InstanceCalls`)

    >>> from colloc_kit.gpu import mig_planner
    >>> [i.label() for i in mig_planner.plan("4g,2g,1g", "A100-40GB").instances]
    ['4g.20gb@0', '2g.10gb@4', '1g.5gb@6']
"""

__all__ = ["mig_apply", "mig_catalogue", "mig_handles", "mig_instance_calls", "mig_instances", "mig_live",
           "mig_planner", "mig_read", "mig_simulator", "mig_state", "mps_daemon", "mps_detect", "mps_watchdog", "nvml",
           "pids"]
