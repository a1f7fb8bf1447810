"""`make test-slurm`: run a few figure targets through profiles/slurm on a throwaway single-node
Slurm on this machine, and leave the machine as it was found.

Root on Debian only (it installs Debian's packages and starts daemons); not part of `make test`.
In one go:

1. refuse, in one line with exit status 2, before anything else, when not root, not Debian
   (apt-get, dpkg-query), or when a Slurm or munge daemon already runs or /etc/slurm/slurm.conf
   exists (a Slurm of the machine's own is never touched);
2. copy the working tree twice (tests/worktree.py: git's files, no results/, sharing .venv) and
   build the targets in the first with local cores (`--forceall`); plan them in the second with
   the profile, to count the jobs that must go through `sbatch`;
3. note the installed packages, system users and paths; `apt-get install --no-install-recommends
   slurm-wlm munge` where missing; start munged (as user munge), slurmctld and slurmd from a
   generated slurm.conf (`slurm_conf`: partitions `cpu` and `gpu` on this one node, no
   accounting daemon, MinJobAge long enough for the profile's `squeue` status checks) written to
   /etc/slurm/slurm.conf (the plugin's job step drops SLURM_CONF from the environment before it
   calls `srun`, so the configuration must be where every Slurm command looks by default), with
   the daemons' state, logs and pid files in a temporary folder;
4. build the same targets in the second copy with `snakemake --profile profiles/slurm
   --forceall --slurm-keep-successful-logs`;
5. check that every planned job ran, each job with a command through `sbatch` (the plugin's
   "submitted with SLURM jobid" lines; Snakemake itself runs only the target rules, which have
   no command), that Slurm lists each of those jobs as COMPLETED in its partition (`squeue
   --states=all`) and that each left its Slurm log (.snakemake/slurm_logs/rule_<rule>/.../
   <jobid>.log);
6. always, also after a failure or Ctrl-C: cancel what is left in the queue, stop slurmd,
   slurmctld and munged by their pid files, purge exactly the packages step 3 installed, remove
   the users and paths that were not there before, and check that the package list is the one
   found at the start;
7. compare every file under results/ and figures/*.csv of the two copies (byte-identical
   expected; PDF and PNG figures are drawn from these files and not compared).

The evidence (summary.json, the Slurm run's output, its Slurm logs, the daemons' logs) is kept in
logs/test-slurm/ of this checkout. Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = ROOT / ".venv" / "bin" / "snakemake"
PROFILE = "profiles/slurm"
EVIDENCE = ROOT / "logs" / "test-slurm"
TARGETS = ("fig3a", "fig3b", "fig4a")
PACKAGES = ("slurm-wlm", "munge")
PARTITIONS = ("cpu", "gpu")
# Finished jobs stay visible to `squeue` this long; the profile's status checks need at least
# 3 x slurm-init-seconds-before-status-checks (tests/workflow/test_workflow_slurm.py checks both).
MIN_JOB_AGE_S = 600
SLURM_BUILD_TIMEOUT_S = 1800

OS_RELEASE = Path("/etc/os-release")
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
DAEMONS = ("slurmctld", "slurmd", "slurmdbd", "slurmstepd", "munged")
MUNGE_PID = Path("/run/munge/munged.pid")
# What the packages and the daemons may create: removed at the end unless present at the start.
SYSTEM_PATHS = tuple(
    Path(p)
    for p in (
        "/etc/munge",
        "/var/lib/munge",
        "/var/log/munge",
        "/run/munge",
        "/etc/slurm",
        "/var/lib/slurm",
        "/var/log/slurm",
        "/var/spool/slurmctld",
        "/var/spool/slurmd",
        "/run/slurm",
    )
)
SYSTEM_USERS = ("munge", "slurm")
APT_CACHE = Path("/var/cache/apt/archives")
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "NEEDRESTART_MODE": "a"}


class Failed(Exception):
    """A step of the run failed; the message says which and why."""


# ---- refusal ------------------------------------------------------------------------------------
def is_debian(os_release: str) -> bool:
    """Whether /etc/os-release text names Debian or a derivative (ID or ID_LIKE)."""
    fields = dict(
        line.split("=", 1) for line in os_release.splitlines() if "=" in line and line[0] != "#"
    )
    ids = {fields.get("ID", "").strip("\"'")} | set(fields.get("ID_LIKE", "").strip("\"'").split())
    return "debian" in ids


def running_daemons() -> list[str]:
    """Slurm and munge daemons running now (by /proc/<pid>/comm): 'name (pid)'."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue
        if name in DAEMONS:
            found.append(f"{name} ({comm.parent.name})")
    return sorted(found)


def refusal() -> str | None:
    """Why this machine cannot run the test (None: it can). Reads only; changes nothing."""
    if os.geteuid() != 0:
        return "needs root: it installs Debian's slurm-wlm and munge and starts their daemons"
    text = OS_RELEASE.read_text() if OS_RELEASE.is_file() else ""
    if not is_debian(text):
        return f"needs Debian (apt-get, Debian's slurm-wlm and munge); {OS_RELEASE} names no Debian"
    missing = [tool for tool in ("apt-get", "dpkg-query") if shutil.which(tool) is None]
    if missing:
        return f"needs Debian's package tools; not found: {', '.join(missing)}"
    running = running_daemons()
    if running:
        return f"a Slurm or munge daemon already runs here ({', '.join(running)}); left alone"
    if SYSTEM_CONF.exists():
        return f"{SYSTEM_CONF} exists: this machine has a Slurm of its own; left alone"
    return None


# ---- slurm.conf ---------------------------------------------------------------------------------
def slurm_conf(host: str, cpus: int, real_memory_mb: int, state: Path) -> str:
    """slurm.conf of a one-node cluster on localhost: controller and node `host` at 127.0.0.1,
    partitions `cpu` (the default) and `gpu` on that node, no accounting daemon (sacct has
    nothing to ask), finished jobs listed by squeue for MIN_JOB_AGE_S. Spool, state, logs and
    pid files under `state`. `real_memory_mb` must not exceed the node's memory (MiB)."""
    if cpus < 1 or real_memory_mb < 1:
        raise ValueError(f"cpus {cpus} and real_memory_mb {real_memory_mb} must be >= 1")
    lines = [
        "# Generated by tools/slurm/local_slurm.py for `make test-slurm`; removed after the run.",
        "ClusterName=llmqueue-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "MpiDefault=none",
        f"StateSaveLocation={state / 'slurmctld'}",
        f"SlurmdSpoolDir={state / 'slurmd'}",
        f"SlurmctldPidFile={state / 'slurmctld.pid'}",
        f"SlurmdPidFile={state / 'slurmd.pid'}",
        f"SlurmctldLogFile={state / 'slurmctld.log'}",
        f"SlurmdLogFile={state / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        f"MinJobAge={MIN_JOB_AGE_S}",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={real_memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITIONS[0]} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        *(f"PartitionName={p} Nodes={host} MaxTime=INFINITE State=UP" for p in PARTITIONS[1:]),
    ]
    return "\n".join(lines) + "\n"


def node_memory_mb(meminfo: str) -> int:
    """RealMemory to declare: 90% of MemTotal (/proc/meminfo text), in MiB."""
    m = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.M)
    if not m:
        raise Failed("/proc/meminfo has no MemTotal line")
    return int(m.group(1)) * 9 // 10 // 1024


# ---- what the run leaves behind -----------------------------------------------------------------
def installed_packages() -> dict[str, str]:
    """Every package dpkg knows, with its status word (installed, config-files, ...)."""
    out = sh(["dpkg-query", "-W", "-f=${Package}:${Architecture} ${db:Status-Status}\n"]).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def newly_installed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Packages installed now that were not installed at the start."""
    return sorted(p for p, s in after.items() if s == "installed" and before.get(p) != "installed")


def existing_users(names: Iterable[str]) -> dict[str, set[str]]:
    """Which of `names` exist as users and as groups."""
    found: dict[str, set[str]] = {"passwd": set(), "group": set()}
    for db in found:
        for name in names:
            if subprocess.run(["getent", db, name], capture_output=True).returncode == 0:
                found[db].add(name)
    return found


def submitted_jobs(snakemake_output: str) -> dict[str, str]:
    """Slurm job id -> Snakemake job id, from the plugin's submission lines."""
    return {
        slurm: job
        for job, slurm in re.findall(
            r"Job (\d+) has been submitted with SLURM jobid (\d+)", snakemake_output
        )
    }


def job_headers(snakemake_output: str) -> list[tuple[str, str]]:
    """('rule' or 'localrule', rule name) of every job Snakemake printed: a run prints the jobs
    it submits as 'rule' and those it runs itself as 'localrule' (a dry run: all as 'rule')."""
    return re.findall(r"^(rule|localrule) (\S+):$", snakemake_output, re.M)


def slurm_log_rule(log: Path, logdir: Path) -> str:
    """The rule of a Slurm log logdir/rule_<rule>/[<wildcards>/]<jobid>.log."""
    return log.relative_to(logdir).parts[0].removeprefix("rule_")


def log_shows_finished(text: str, rule: str) -> bool:
    """Whether a Slurm log shows the job step's Snakemake (executor slurm-jobstep) finishing
    a job of `rule`."""
    return re.search(rf"^Finished jobid: \d+ \(Rule: {re.escape(rule)}\)$", text, re.M) is not None


def compared_files(root: Path, since: float = 0.0) -> list[str]:
    """The computed files of a build started at `since` (epoch seconds): everything under
    results/, and the tables figures/*.csv it wrote (the copy's own are the committed ones)."""
    files = [p for p in (root / "results").rglob("*") if p.is_file()]
    files += [
        p for p in (root / "figures").glob("*.csv") if p.is_file() and p.stat().st_mtime >= since
    ]
    return sorted(str(p.relative_to(root)) for p in files)


def compare_builds(a: Path, b: Path, since: float = 0.0) -> dict[str, list[str]]:
    """Files of `compared_files` byte-identical in both, different, or on one side only."""
    fa, fb = set(compared_files(a, since)), set(compared_files(b, since))
    both = sorted(fa & fb)
    same = [f for f in both if (a / f).read_bytes() == (b / f).read_bytes()]
    return {
        "identical": same,
        "different": [f for f in both if f not in same],
        "only_local": sorted(fa - fb),
        "only_slurm": sorted(fb - fa),
    }


# ---- processes ----------------------------------------------------------------------------------
def sh(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
    check: bool = True,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in cmd],
        env={**os.environ, **(env or {})},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-2000:]
        raise Failed(f"`{' '.join(map(str, cmd))}` exited {done.returncode}:\n{tail}")
    return done


def pid_comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def wait_for(what: str, ready: Callable[[], object], timeout: float, every: float = 0.5) -> object:
    """Poll `ready()` until it returns something true; Failed after `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        got = ready()
        if got:
            return got
        if time.monotonic() > end:
            raise Failed(f"{what}: not after {timeout:.0f} s")
        time.sleep(every)


def stop_by_pid_file(pid_file: Path, name: str, log: list[str]) -> None:
    """SIGTERM the process named `name` whose pid `pid_file` holds, SIGKILL after 30 s."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        log.append(f"{name}: no pid file {pid_file}")
        return
    stop_pid(pid, name, log)


def stop_pid(pid: int, name: str, log: list[str]) -> None:
    if pid_comm(pid) != name:
        log.append(f"{name} ({pid}): not running")
        return
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 30
    while pid_comm(pid) == name and time.monotonic() < end:
        time.sleep(0.2)
    if pid_comm(pid) == name:
        os.kill(pid, signal.SIGKILL)
        log.append(f"{name} ({pid}): killed after 30 s")
    else:
        log.append(f"{name} ({pid}): stopped")


def start_daemon(cmd: list[str], state: Path, env: dict[str, str] | None = None) -> None:
    """Run a daemon's start command (it forks and returns); its own output to state/starts.log,
    never to a pipe a daemon could keep open."""
    with (state / "starts.log").open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(
            cmd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
        )
    if done.returncode != 0:
        log = (state / "starts.log").read_text()[-1500:]
        raise Failed(f"`{' '.join(cmd)}` exited {done.returncode}:\n{log}")


def copy_tree(dest: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from worktree import copy_worktree  # tests/worktree.py
    finally:
        sys.path.pop(0)
    dest.mkdir(parents=True)
    return copy_worktree(dest)


# ---- the run ------------------------------------------------------------------------------------
class Run:
    def __init__(self, targets: Sequence[str], tmp: Path) -> None:
        self.targets = list(targets)
        self.tmp = tmp
        self.state = tmp / "cluster"
        self.conf = SYSTEM_CONF
        self.env = {"SLURM_CONF": str(self.conf)}
        self.summary: dict = {
            "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine(),
            "load_start": os.getloadavg(),
            "targets": self.targets,
            "profile": PROFILE,
            "seconds": {},
            "checks": {},
        }
        self.problems: list[str] = []
        self.teardown_log: list[str] = []
        self.started: list[tuple[Path, str]] = []

    def step(self, name: str, fn: Callable[..., object], *args: object) -> object:
        print(f"test-slurm: {name} ...", flush=True)
        t0 = time.monotonic()
        try:
            return fn(*args)
        finally:
            self.summary["seconds"][name] = round(time.monotonic() - t0, 1)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.summary["checks"][name] = {"ok": ok, "detail": detail}
        print(f"test-slurm: {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if not ok:
            self.problems.append(f"{name}: {detail}")

    # -- the local build and the plan, before Slurm is installed --
    def local_build(self) -> None:
        self.copied_at = time.time()
        self.local = copy_tree(self.tmp / "local")
        self.slurm = copy_tree(self.tmp / "slurm")
        done = sh(
            [SNAKEMAKE, "--cores", str(os.cpu_count() or 1), "--forceall", *self.targets],
            cwd=self.local,
            check=False,
        )
        if done.returncode != 0:
            raise Failed(f"local build exited {done.returncode}:\n{done.stderr[-2000:]}")
        plan = sh(
            [SNAKEMAKE, "-n", "--profile", PROFILE, "--forceall", *self.targets], cwd=self.slurm
        )
        self.planned = len(job_headers(plan.stdout + plan.stderr))
        self.summary["planned_jobs"] = self.planned
        if not self.planned:
            raise Failed(f"the profile plans no Slurm job for {self.targets}")

    def noop_seconds(self) -> float:
        """Wall time of a dry run with nothing to do in the local copy (Snakemake's start-up)."""
        t0 = time.monotonic()
        sh([SNAKEMAKE, "-n", "--cores", "1", *self.targets], cwd=self.local)
        return round(time.monotonic() - t0, 1)

    # -- install and start --
    def record_machine_state(self) -> None:
        self.packages_before = installed_packages()
        self.users_before = existing_users(SYSTEM_USERS)
        self.paths_before = {p for p in SYSTEM_PATHS if p.exists()}
        self.debs_before = set(APT_CACHE.glob("*.deb"))

    def install(self) -> None:
        missing = [
            p
            for p in PACKAGES
            if not any(
                k.split(":")[0] == p and s == "installed" for k, s in self.packages_before.items()
            )
        ]
        self.summary["packages_missing"] = missing
        if missing:
            cmd = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
            done = sh(cmd, env=APT_ENV, check=False)
            if done.returncode != 0:  # stale package lists: update them once and retry
                sh(["apt-get", "update"], env=APT_ENV)
                sh(cmd, env=APT_ENV)
        self.installed = newly_installed(self.packages_before, installed_packages())
        self.summary["packages_installed"] = self.installed
        self.summary["slurm_version"] = sh(
            ["dpkg-query", "-W", "-f=${Version}", "slurm-client"]
        ).stdout.strip()

    def start(self) -> None:
        for sub in ("slurmctld", "slurmd"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        host = platform.node().split(".")[0]
        mem = node_memory_mb(Path("/proc/meminfo").read_text())
        self.conf.parent.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(slurm_conf(host, os.cpu_count() or 1, mem, self.state))
        # munged: the package may have started it already (an init script); else as user munge
        if not (MUNGE_PID.is_file() and pid_comm(int(MUNGE_PID.read_text().split()[0]))):
            run_dir = MUNGE_PID.parent
            run_dir.mkdir(mode=0o755, exist_ok=True)
            shutil.chown(run_dir, "munge", "munge")
            start_daemon(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], self.state)
        self.started.append((MUNGE_PID, "munged"))
        wait_for("munged's pid file", MUNGE_PID.is_file, 10)
        cred = sh(["munge", "-n"]).stdout
        if "Success" not in sh(["unmunge"], stdin=cred).stdout:
            raise Failed("munge -n | unmunge does not say Success")
        for daemon, args in (("slurmctld", ["-i"]), ("slurmd", [])):
            start_daemon([f"/usr/sbin/{daemon}", *args], self.state, env=self.env)
            self.started.append((self.state / f"{daemon}.pid", daemon))
        wait_for("both partitions idle in sinfo", self.partitions_idle, 60)

    def partitions_idle(self) -> bool:
        done = sh(["sinfo", "-h", "-o", "%R|%t"], env=self.env, check=False)
        states = dict(line.split("|", 1) for line in done.stdout.split() if "|" in line)
        return all(states.get(p) == "idle" for p in PARTITIONS)

    # -- the Slurm build and its evidence --
    def slurm_build(self) -> None:
        """The targets through the profile; Snakemake's output goes to the evidence folder as it
        comes (`tail -f logs/test-slurm/snakemake-slurm.log` to follow)."""
        cmd = [SNAKEMAKE, "--profile", PROFILE, "--forceall", "--slurm-keep-successful-logs"]
        out_path = EVIDENCE / "snakemake-slurm.log"
        print(f"test-slurm: Snakemake's output: {out_path.relative_to(ROOT)}", flush=True)
        with out_path.open("w") as out:
            proc = subprocess.Popen(
                [str(c) for c in [*cmd, *self.targets]],
                cwd=self.slurm,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            try:
                proc.wait(timeout=SLURM_BUILD_TIMEOUT_S)
            except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
                proc.send_signal(signal.SIGINT)  # Snakemake cancels its Slurm jobs
                proc.wait(timeout=120)
                if isinstance(e, KeyboardInterrupt):
                    raise
                raise Failed(f"the Slurm build ran past {SLURM_BUILD_TIMEOUT_S} s") from None
        self.output = out_path.read_text()
        self.summary["slurm_build_exit"] = proc.returncode
        self.check("slurm build", proc.returncode == 0, f"snakemake exited {proc.returncode}")

    def evidence(self) -> None:
        submitted = submitted_jobs(self.output)
        jobs = job_headers(self.output)
        remote = [rule for kind, rule in jobs if kind == "rule"]
        local = sorted(rule for kind, rule in jobs if kind == "localrule")
        done = re.findall(r"^(\d+) of (\d+) steps \(100%\) done$", self.output, re.M)
        self.check(
            "every job ran",
            len(jobs) == self.planned and done == [(str(self.planned),) * 2],
            f"{len(jobs)} of {self.planned} planned jobs ran"
            + (f" ({done[-1][0]} of {done[-1][1]} steps done)" if done else ""),
        )
        self.check(
            "sbatch submissions",
            bool(remote) and len(submitted) == len(remote) and set(local) <= set(self.targets),
            f"{len(submitted)} jobs submitted with sbatch, one per job with a command "
            f"({len(remote)}); run by Snakemake itself: {', '.join(local) or 'none'} "
            "(the target rules, no command)",
        )
        self.summary["jobs_in_snakemake"] = local
        q = sh(
            ["squeue", "--states=all", "-h", "-o", "%i|%T|%P|%j"], env=self.env, check=False
        ).stdout
        rows = {r[0]: r[1:] for r in (line.split("|") for line in q.split()) if len(r) == 4}
        bad = {j: rows.get(j) for j in submitted if not rows.get(j) or rows[j][0] != "COMPLETED"}
        parts = sorted({rows[j][1] for j in submitted if j in rows})
        self.check(
            "squeue states",
            bool(submitted) and not bad,
            f"{len(submitted) - len(bad)} of {len(submitted)} COMPLETED in partition(s) "
            f"{', '.join(parts) or '-'}" + (f"; not: {bad}" if bad else ""),
        )
        logdir = self.slurm / ".snakemake" / "slurm_logs"
        logs = {p.stem: p for p in logdir.rglob("*.log")}
        missing = sorted(set(submitted) - set(logs))
        unfinished = sorted(
            j
            for j in set(submitted) & set(logs)
            if not log_shows_finished(logs[j].read_text(), slurm_log_rule(logs[j], logdir))
        )
        self.check(
            "slurm logs",
            bool(submitted) and not missing and not unfinished,
            f"{len(set(submitted) & set(logs))} of {len(submitted)} jobs left a Slurm log "
            f"under .snakemake/slurm_logs/ that shows its rule finished"
            + (f"; missing {missing}" if missing else "")
            + (f"; not finished {unfinished}" if unfinished else ""),
        )
        self.summary["slurm_jobs"] = {
            j: {
                "snakemake_job": submitted[j],
                "state": (rows.get(j) or ["?"])[0],
                "partition": (rows.get(j) or ["?", "?"])[1],
                "log": str(logs[j].relative_to(self.slurm)) if j in logs else None,
            }
            for j in sorted(submitted, key=int)
        }
        config = sh(["scontrol", "show", "config"], env=self.env, check=False).stdout
        m = re.search(r"^MinJobAge\s*=\s*(.+)$", config, re.M)
        self.summary["min_job_age"] = m.group(1).strip() if m else None

    def compare(self) -> None:
        cmp = compare_builds(self.local, self.slurm, self.copied_at)
        self.summary["comparison"] = cmp
        n = len(cmp["identical"])
        bad = {k: v for k, v in cmp.items() if k != "identical" and v}
        total = n + sum(map(len, bad.values()))
        self.check(
            "outputs",
            n > 0 and not bad,
            f"{n} of {total} computed files (results/, figures/*.csv) byte-identical in the Slurm "
            "and the local build" + "".join(f"; {k}: {v}" for k, v in bad.items()),
        )

    # -- tear down: always --
    def teardown(self) -> None:
        log = self.teardown_log
        if self.conf.is_file() and shutil.which("squeue"):
            q = sh(["squeue", "-h", "-o", "%i|%T"], env=self.env, check=False, timeout=30)
            live = [line.split("|")[0] for line in q.stdout.split() if "|" in line]
            if live:
                sh(["scancel", *live], env=self.env, check=False, timeout=30)
                log.append(f"cancelled jobs {live}")
        for pid_file, name in reversed(self.started):
            stop_by_pid_file(pid_file, name, log)
        for entry in running_daemons():  # job steps the daemons left (none were here before)
            name, pid = entry.rsplit(" (", 1)
            stop_pid(int(pid.rstrip(")")), name, log)
        if self.conf.is_file():  # the preflight made sure there was none before
            self.conf.unlink()
            log.append(f"removed {self.conf}")
        if getattr(self, "packages_before", None) is None:
            return
        now = installed_packages()
        purge = newly_installed(self.packages_before, now)
        if purge:
            done = sh(["apt-get", "purge", "-y", *purge], env=APT_ENV, check=False, timeout=900)
            log.append(f"purged {len(purge)} packages (exit {done.returncode}): {purge}")
        users_now = existing_users(SYSTEM_USERS)
        for name in sorted(users_now["passwd"] - self.users_before["passwd"]):
            sh(["userdel", name], check=False)
            log.append(f"removed user {name}")
        for name in sorted(existing_users(SYSTEM_USERS)["group"] - self.users_before["group"]):
            sh(["groupdel", name], check=False)
            log.append(f"removed group {name}")
        for path in SYSTEM_PATHS:
            if path.exists() and path not in self.paths_before:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
                log.append(f"removed {path}")
        new_debs = sorted(set(APT_CACHE.glob("*.deb")) - self.debs_before)
        for deb in new_debs:  # what apt-get install downloaded
            deb.unlink()
        if new_debs:
            log.append(f"removed {len(new_debs)} downloaded packages from {APT_CACHE}")
        after = installed_packages()
        changed = sorted(
            p
            for p in set(after) | set(self.packages_before)
            if after.get(p) != self.packages_before.get(p)
        )
        self.summary["restored"] = {
            "packages_changed": changed,
            "daemons_running": running_daemons(),
            "users_left": sorted(
                existing_users(SYSTEM_USERS)["passwd"] - self.users_before["passwd"]
            ),
            "paths_left": [
                str(p) for p in SYSTEM_PATHS if p.exists() and p not in self.paths_before
            ],
        }
        left = {k: v for k, v in self.summary["restored"].items() if v}
        self.check(
            "machine restored",
            not left,
            "package list, users and paths as found; no Slurm or munge daemon running"
            if not left
            else f"left behind: {left}",
        )

    def keep_evidence(self) -> None:
        EVIDENCE.mkdir(parents=True, exist_ok=True)
        logs = self.slurm / ".snakemake" / "slurm_logs" if hasattr(self, "slurm") else None
        if logs and logs.is_dir():
            shutil.rmtree(EVIDENCE / "slurm_logs", ignore_errors=True)
            shutil.copytree(logs, EVIDENCE / "slurm_logs")
        if self.conf.is_file():
            shutil.copy2(self.conf, EVIDENCE / "slurm.conf")
        for name in ("slurmctld.log", "slurmd.log", "starts.log"):
            if (self.state / name).is_file():
                shutil.copy2(self.state / name, EVIDENCE / name)


def machine() -> str:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()}-core {model}, {platform.node()}, {platform.platform()}"


def run_test(targets: Sequence[str], keep: bool) -> int:
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="llmqueue-test-slurm-"))
    shutil.rmtree(EVIDENCE, ignore_errors=True)  # the last run's
    EVIDENCE.mkdir(parents=True)
    run = Run(targets, tmp)
    try:
        run.step("local build", run.local_build)
        run.summary["noop_seconds_before"] = run.noop_seconds()
        run.record_machine_state()
        try:
            run.step("install", run.install)
            run.step("start slurm", run.start)
            run.step("slurm build", run.slurm_build)
            run.evidence()
        finally:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C waits
            try:
                run.keep_evidence()
                run.step("teardown", run.teardown)
            finally:
                signal.signal(signal.SIGINT, previous)
        run.summary["noop_seconds_after"] = run.noop_seconds()
        run.compare()
    except (Failed, subprocess.TimeoutExpired, OSError, KeyboardInterrupt) as e:
        run.problems.append(f"{type(e).__name__}: {e}")
        print(f"test-slurm: FAIL {e}", file=sys.stderr, flush=True)
    finally:
        if keep:
            print(f"test-slurm: copies kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        run.summary["seconds"]["total"] = round(time.monotonic() - t0, 1)
        run.summary["load_end"] = os.getloadavg()
        run.summary["problems"] = run.problems
        run.summary["teardown"] = run.teardown_log
        EVIDENCE.mkdir(parents=True, exist_ok=True)
        (EVIDENCE / "summary.json").write_text(json.dumps(run.summary, indent=1) + "\n")
    verdict = "passed" if not run.problems else f"FAILED ({len(run.problems)} problems)"
    print(
        f"test-slurm: {verdict} in {run.summary['seconds']['total']:.0f} s; "
        f"evidence in {EVIDENCE.relative_to(ROOT)}/"
    )
    return 0 if not run.problems else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preflight", action="store_true", help="only check that this machine can run the test"
    )
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), metavar="TARGET")
    parser.add_argument("--keep", action="store_true", help="keep the two copies of the tree")
    opts = parser.parse_args(argv)
    why = refusal()
    if why:
        print(f"make test-slurm: refused: {why}", file=sys.stderr)
        return 2
    if opts.preflight:
        return 0
    if not SNAKEMAKE.is_file():
        print(f"make test-slurm: refused: {SNAKEMAKE} missing (make install)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # tear down on SIGTERM too
    return run_test(opts.targets, opts.keep)


if __name__ == "__main__":
    sys.exit(main())
