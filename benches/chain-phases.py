#!/usr/bin/env python3
"""Where a chain stage's time goes, against the fork floor (docs/performance.md).

    benches/chain-phases.py [SPECBRIDGE] [N] [ROUNDS]

Runs a chain of N no-op check stages (benches/gen-dag.sh, `sandbox: off`,
`--concurrency 1`; default 200) and the floor loop of the same N commands
(benches/group-floor.c, built here with `cc`) one after the other, ROUNDS
times each (default 3), each under `perf record` of the scheduler's exec and
exit events and of `wait4` and `clone`/`clone3` on the whole machine (needs
`perf` and the right to trace it). Prints, for each side, the medians over
every stage of every round of five phases of one stage:

    command   the `sh`'s exec to its `touch`'s exit
    sh exit   the `touch`'s exit to the `sh`'s
    reap      the `sh`'s exit to the parent's next `wait4` (for specbridge,
              the reap of the command's leader, after its pipes were drained)
    between   that `wait4` to the parent's next `clone`/`clone3`: the parent's
              work between two commands (specbridge's records of the stage
              that ended, the next stage's input hash and spawn)
    spawn     that `clone` to the next `sh`'s exec

and their sum, one stage's cost. The floor loop forks (`clone`), specbridge
spawns (`clone3` with `CLONE_VFORK`). The tracing slows every side alike; the
phases are for comparing the two, not for the per-stage goals (benches/dag.sh).
Nothing is deleted while the rounds run: each run's `out/` is moved into the
scratch folder, which goes at the end.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ["command", "sh exit", "reap", "between", "spawn"]
LINE = re.compile(r"\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)")


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def repo(scratch, n):
    d = os.path.join(scratch, f"chain-{n}")
    os.makedirs(os.path.join(d, "out"))
    sh("git", "-C", d, "init", "-q")
    sh("git", "-C", d, "config", "user.email", "bench@example.com")
    sh("git", "-C", d, "config", "user.name", "bench")
    with open(os.path.join(d, ".gitignore"), "w") as f:
        f.write("out/\n")
    with open(os.path.join(d, "specbridge.yaml"), "w") as f:
        sh(os.path.join(ROOT, "benches", "gen-dag.sh"), "chain", str(n), stdout=f,
           env={**os.environ, "SANDBOX": "off"})
    sh("git", "-C", d, "add", "-A")
    sh("git", "-C", d, "commit", "-qm", "pipeline")
    return d


def fresh_out(d, aside):
    os.rename(os.path.join(d, "out"), tempfile.mkdtemp(dir=aside))
    os.mkdir(os.path.join(d, "out"))


def traced(scratch, cwd, argv):
    """The events of one traced run, as (time, comm, event, rest) tuples."""
    data = os.path.join(scratch, "perf.data")
    events = ("sched:sched_process_exec,sched:sched_process_exit,"
              "syscalls:sys_enter_wait4,syscalls:sys_enter_clone,syscalls:sys_enter_clone3")
    sh("perf", "record", "-q", "-a", "-e", events, "-o", data, "--", *argv,
       cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run(["perf", "script", "-i", data], check=True,
                         capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            found.append((float(m.group(3)), m.group(1), m.group(4), m.group(5)))
    return found


def phases(events):
    """Each stage's five phases in ms, from one run's events."""
    stages, cur = [], {}
    for t, comm, event, rest in events:
        if event.startswith("sched:sched_process_exec") and re.search(r"filename=\S*/sh\b", rest):
            if "clone" in cur:
                cur["next"] = t
                stages.append(cur)
            cur = {"exec": t}
        elif event.startswith("sched:sched_process_exit") and comm == "touch" and "exec" in cur:
            cur["touch"] = t
        elif event.startswith("sched:sched_process_exit") and comm == "sh" and "touch" in cur:
            cur["exit"] = t
        elif "wait4" in event and "exit" in cur and "reap" not in cur:
            cur["reap"] = t
        elif "clone" in event and "reap" in cur and "clone" not in cur:
            cur["clone"] = t
    marks = ["exec", "touch", "exit", "reap", "clone", "next"]
    return [[(s[b] - s[a]) * 1e3 for a, b in zip(marks, marks[1:])] for s in stages]


def main():
    sb = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                         else os.path.join(ROOT, "target", "release", "specbridge"))
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    scratch = tempfile.mkdtemp()
    try:
        aside = os.path.join(scratch, "aside")
        os.mkdir(aside)
        floor_bin = os.path.join(scratch, "group-floor")
        sh("cc", "-O2", "-o", floor_bin, os.path.join(ROOT, "benches", "group-floor.c"))
        chain = repo(scratch, n)
        floor_dir = os.path.join(scratch, "floor")
        os.makedirs(os.path.join(floor_dir, "out"))
        sides = {
            "specbridge": (chain, [sb, "-C", chain, "run", "--concurrency", "1", "--json"]),
            "floor": (floor_dir, [floor_bin, str(n), "sh", "-c", "true && touch out/s{}"]),
        }
        # One untimed run of each: caches warm, the repository's first run made.
        for cwd, argv in sides.values():
            subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = {name: [] for name in sides}
        for _ in range(rounds):
            for name, (cwd, argv) in sides.items():
                fresh_out(cwd, aside)
                rows[name] += phases(traced(scratch, cwd, argv))
        print(f"Chain of {n}, {rounds} traced runs each; medians over every stage, ms")
        print()
        print("| side | stages | " + " | ".join(PHASES) + " | sum |")
        print("|---|---|" + "---|" * (len(PHASES) + 1))
        for name, stages in rows.items():
            med = [statistics.median(col) for col in zip(*stages)]
            cells = " | ".join(f"{m:.3f}" for m in med)
            print(f"| {name} | {len(stages)} | {cells} | {sum(med):.3f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
