#!/usr/bin/env python3
"""One agent stage against a bare `claude -p`, timed in pairs from here
(docs/performance.md): the same pipeline, argv, stdin and scripted model as
benches/agent.sh, but each side started directly, with no shell and no `env`
around it, so the ratio is not widened by their spread. Also prints
specbridge's own time: its run less the CLI's `durationMs` in process.json.
The CLI's time counts from its spawn, and an agent attempt's first batch is
written after the spawn, while the CLI starts and before it is given its
prompt, with a generate stage's before-snapshot finished for it: both are in
the CLI's time, not in specbridge's own; only the ratio of the two runs tells
whether they slowed the CLI.

    benches/agent-pairs.py SPECBRIDGE CLAUDE SERVER [PAIRS] [OLD_SPECBRIDGE]

SERVER is the test kit's scripted-model-server (cargo build --release -p
specbridge-testkit --bin scripted-model-server). With OLD_SPECBRIDGE, an older
build runs in every round too, the three in a random order, and both builds'
ratios and own times are printed, with the new build's time less the old's
round by round (median, and mean with its standard error). Every round also makes a second bare call
whose stdout is a pipe read as it arrives (the first one's goes to /dev/null),
and each build's ratio to it is printed too. Nothing leaves the machine: the
CLI talks to the server on 127.0.0.1.

EARLIER_RUNS=N keeps N earlier runs of the same pipeline in the run store for
every timed run, as a repository used for a while has (default 0: the store
is emptied before each run). Each agent attempt compares every file of them
before and after the agent (docs/evidence.md, the run store's check).

Nothing is deleted while the rounds run: a run's folder (or the whole store)
and its document are moved out of the repository instead, and go with the
scratch folder at the end. On ext4 without a journal every inode freed in the
last minute makes the next ones slower to allocate (docs/performance.md), and
only specbridge's side would pay for the deletions: a user does not empty the
run store before each run. DELETE=1 deletes them as before, to compare.

TREE=N puts N more committed files in the repository's working tree, 100 to
a folder under src/ (default 0), as a user's repository has: each agent
attempt's snapshots ask git about every one of them (docs/evidence.md).

FRESH=1 gives every timed run, both sides, a new empty HOME (made before the
clock starts), as a CI job or a new user account has: the CLI's first-run
files and specbridge's user cache folder are written anew each time. Without
it both sides share one warm HOME.

NOSYNC=1 builds benches/nosync.c (needs `cc`) and preloads it into every timed
process, both sides alike: fsync and fdatasync return at once, so the times
show what the disk's waits cost. Such runs are not durable; for measuring only.

KIND=execute times an execute stage instead of a generate stage: the model
writes one file (a `Write` call) and returns its task result, and each run of
either side starts from a clean tree (the file is set aside first). The stage
has no verification commands, so it ends `unverified` (exit 1) after all of
its evidence (both snapshots, the attribution, the patch): what is timed is
the engine around the agent, not the user's tests.

AFTER_CHECK=1 puts a check stage (`true`, unconfined) before the agent
stage, which needs it: the agent attempt then takes its own before-snapshot,
as every agent stage after a run's first does (the snapshot taken ahead of the
run is void once a process has started, docs/evidence.md). Both sides'
times include that stage's few milliseconds.

TEARDOWN=1 times the end of the CLI instead (needs `perf` and the right to
trace the whole machine): every run of each side, in the same random order,
under `perf record` of the scheduler's exec and exit events and of `wait4`,
and prints the medians of: the CLI's main thread's exit to the return of the
`wait4` that reaps it (the kernel tears the CLI down in between), that
`wait4` itself, and, for specbridge, the reap to specbridge's own exit. A bare
call is reaped by a Python parent (a blocking `wait4`, so only its first
number). The tracing slows every side; these runs time nothing else.
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime


def stamp(rfc3339):
    """Seconds since the epoch of a record's `…Z` time stamp."""
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


TRACED = ["sched:sched_process_exec", "sched:sched_process_exit",
          "syscalls:sys_enter_wait4", "syscalls:sys_exit_wait4"]


def traced(argv, data):
    """`argv` run under `perf record` of the events in TRACED, into `data`."""
    return ["perf", "record", "-q", "-a", "-o", data, "-e", ",".join(TRACED), "--", *argv]


def teardown(data):
    """From a `traced` run: (the CLI's main thread's exit to the return of the
    `wait4` that reaps it, that `wait4`, the reap to the exit of the process
    that reaped it), in ms; None where an event is missing."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace"],
                         capture_output=True, text=True).stdout
    events = []
    for line in out.splitlines():
        head, _, trace = line.partition(": ")
        fields = head.split()
        if len(fields) < 3 or "/" not in fields[-2]:
            continue
        pid, tid = fields[-2].split("/")
        event, _, rest = trace.partition(":")
        events.append((float(fields[-1].rstrip(":")) * 1000, pid, tid, rest.strip(), trace))
    cli = exited = entered = reaped = reaper = ended = None
    for t, pid, tid, kind, trace in events:
        if kind.startswith("sched_process_exec") and cli is None and os.path.basename(
                trace.split("filename=")[1].split()[0]).startswith("claude"):
            cli = pid
        elif cli and kind.startswith("sched_process_exit") and pid == tid == cli:
            exited = t
        elif cli and kind.startswith("sys_enter_wait4") and reaped is None:
            entered = (t, tid)
        elif cli and kind.startswith("sys_exit_wait4") and reaped is None \
                and trace.rstrip().endswith(hex(int(cli))):
            reaped, reaper = t, pid
            start = entered[0] if entered and entered[1] == tid else None
        elif reaper and kind.startswith("sched_process_exit") and pid == tid == reaper:
            ended = t
    if not (exited and reaped):
        return None
    return (reaped - exited, reaped - start if start else None,
            ended - reaped if ended else None)

specbridge, claude, server = (os.path.realpath(a) for a in sys.argv[1:4])
pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 12
old = os.path.realpath(sys.argv[5]) if len(sys.argv) > 5 else None
scratch = tempfile.mkdtemp()
script = os.path.join(scratch, "script.json")
execute = os.environ.get("KIND", "generate") == "execute"
repo = os.path.join(scratch, "repo")
written = os.path.join(repo, "bench-note.md")
with open(script, "w") as f:
    if execute:
        # Two model requests a run, on either side: the write, then the result.
        turn = [{"type": "tool_use", "calls": [{"name": "Write", "input": {
                    "file_path": written, "content": "# Notes\n"}}]},
                {"type": "structured_output", "input": {
                    "status": "completed", "summary": "Wrote the notes.",
                    "changedFiles": ["bench-note.md"], "commandsRun": [],
                    "blockingQuestions": []}}]
        json.dump(turn * (4 * pairs + 100), f)
    else:
        json.dump([{"type": "structured_output",
                    "input": {"summary": "s", "markdown": "# Notes\n"},
                    "repeat": "forever"}], f)
port_file = os.path.join(scratch, "port")
model = subprocess.Popen([server, "--script", script, "--port-file", port_file],
                         stderr=subprocess.DEVNULL)
try:
    for _ in range(100):
        if os.path.exists(port_file) and os.path.getsize(port_file):
            break
        time.sleep(0.05)
    port = open(port_file).read().strip()
    os.makedirs(os.path.join(repo, "prompts"))
    git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, stdout=subprocess.DEVNULL)
    git("init", "-q")
    git("config", "user.email", "bench@example.com")
    git("config", "user.name", "bench")
    open(os.path.join(repo, "prompts", "notes.md"), "w").write("Write short notes.\n")
    stage = ("""  - id: notes
    kind: execute
    prompt: prompts/notes.md
""" if execute else """  - id: notes
    kind: generate
    prompt: prompts/notes.md
    output: { schema: builtin:document, document: notes.md }
""")
    if os.environ.get("AFTER_CHECK"):
        stage = ("  - { id: first, kind: check, argv: [\"true\"], sandbox: off }\n"
                 + stage + "    needs: [first]\n")
    tools = "  tools: [Read, Glob, Grep, Edit, Write]\n" if execute else ""
    open(os.path.join(repo, "specbridge.yaml"), "w").write(f"""version: 1
name: bench-agent
runner:
  command: {claude}
{tools}stages:
{stage}""")
    open(os.path.join(repo, ".gitignore"), "w").write("notes.md\n")
    for i in range(int(os.environ.get("TREE", "0"))):
        folder = os.path.join(repo, "src", f"d{i // 100:04d}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{i}.rs"), "w") as f:
            f.write(f"pub fn f{i}() {{}}\n")
    git("add", "-A")
    # No maintenance started behind the commit (a large TREE's loose objects
    # start one): its repack would run beside the timed runs.
    git("-c", "maintenance.auto=false", "commit", "-qm", "pipeline")
    home = os.path.join(scratch, "home")
    os.makedirs(home)
    env = {"PATH": os.environ["PATH"], "HOME": home, "NO_COLOR": "1",
           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "sk-test",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if os.environ.get("NOSYNC"):
        shim = os.path.join(scratch, "nosync.so")
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", shim,
                        os.path.join(here, "nosync.c")], check=True)
        env["LD_PRELOAD"] = shim

    homes = iter(range(1 << 30))

    def run_env():
        """The environment of one timed run: with FRESH, a new empty HOME."""
        if not os.environ.get("FRESH"):
            return env
        fresh = os.path.join(scratch, f"home-{next(homes)}")
        os.makedirs(fresh)
        return {**env, "HOME": fresh}

    runs_dir = os.path.join(repo, ".specbridge", "runs")
    kept = set()
    aside = os.path.join(scratch, "aside")
    os.makedirs(aside)

    def set_aside(path):
        """Out of the repository, by a rename (or deleted, with DELETE=1)."""
        if not os.path.lexists(path):
            return
        if os.environ.get("DELETE"):
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
            return
        os.rename(path, os.path.join(aside, str(uuid.uuid4())))

    def runs():
        return set(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else set()

    def run_specbridge(build=None, trace=None):
        # Only the earlier runs kept stay: the store is the same for every run.
        if kept:
            for extra in runs() - kept:
                set_aside(os.path.join(runs_dir, extra))
        else:
            set_aside(os.path.join(repo, ".specbridge"))
        set_aside(os.path.join(repo, "notes.md"))
        set_aside(written)
        before = runs()
        timed_env = run_env()
        t = time.perf_counter()
        clock = time.time()
        argv_ = [build or specbridge, "run", "--json"]
        # An execute stage without verification commands ends `unverified`.
        done = subprocess.run(traced(argv_, trace) if trace else argv_, cwd=repo,
                              env=timed_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL if trace else None)
        if done.returncode not in ((0, 1) if execute else (0,)):
            raise subprocess.CalledProcessError(done.returncode, argv_)
        wall = (time.perf_counter() - t) * 1000
        (new_run,) = runs() - before
        attempt = os.path.join(runs_dir, new_run, "stages/notes/attempt-001")
        process = json.load(open(os.path.join(attempt, "process.json")))
        status = json.load(open(os.path.join(attempt, "..", "stage.json")))["status"]
        if status != ("unverified" if execute else "succeeded"):
            raise SystemExit(f"the stage ended {status}: {attempt}")
        # The CLI's spawn and reap by the wall clock (millisecond stamps): the
        # run's own time before the one and after the other.
        spawned = stamp(process["startedAt"]) - clock
        split = (spawned * 1000, wall - spawned * 1000 - process["durationMs"])
        return (wall, process["durationMs"], process["redactedArgv"],
                open(os.path.join(attempt, "prompt.md"), "rb").read(), split)

    # The argv and stdin specbridge used (no secret is in them here); each bare
    # call gets a fresh session id, as each run does.
    _, _, argv, prompt, _ = run_specbridge()
    # That first run is the first of those kept, when any are.
    earlier = int(os.environ.get("EARLIER_RUNS", "0"))
    for _ in range(earlier - 1):
        kept = runs()
        run_specbridge()
    kept = runs() if earlier else set()

    # The bare call's stdout goes to /dev/null, or with PIPED to a pipe read
    # here as it arrives, as specbridge reads the CLI's (a caller that keeps
    # the output reads it from a pipe too).
    def run_bare(piped=False, trace=None):
        a = list(argv)
        a[a.index("--session-id") + 1] = str(uuid.uuid4())
        set_aside(written)
        if trace:
            # Reaped by a Python parent, as the untraced bare call is.
            reaper = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"
            a = traced([sys.executable, "-c", reaper, *a], trace)
        timed_env = run_env()
        t = time.perf_counter()
        if piped:
            p = subprocess.Popen(a, cwd=repo, env=timed_env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
            p.stdin.write(prompt)
            p.stdin.close()
            while p.stdout.read1(65536):
                pass
            if p.wait() != 0:
                raise subprocess.CalledProcessError(p.returncode, a)
        else:
            subprocess.run(a, cwd=repo, env=timed_env, input=prompt, stdout=subprocess.DEVNULL,
                           check=True)
        return (time.perf_counter() - t) * 1000

    builds = [specbridge] + ([old] if old else [])
    if os.environ.get("TEARDOWN"):
        ends = {side: [] for side in builds + [None]}
        order = random.Random(0)
        data = os.path.join(scratch, "perf.data")
        for _ in range(pairs):
            sides = builds + [None]
            order.shuffle(sides)
            for side in sides:
                if side is None:
                    run_bare(trace=data)
                else:
                    run_specbridge(side, trace=data)
                end = teardown(data)
                if end:
                    ends[side].append(end)
        med = lambda v: f"{statistics.median(v):.2f}" if v else "?"
        for side, got in ends.items():
            name = "bare claude -p" if side is None else (
                "specbridge" + ("" if not old else (" (new)" if side == specbridge else " (old)")))
            print(f"{name}: {len(got)} traced runs; medians, ms: the CLI's exit to its reap "
                  f"{med([g[0] for g in got])}, the reaping wait4 "
                  f"{med([g[1] for g in got if g[1] is not None])}"
                  + ("" if side is None else
                     f", the reap to specbridge's exit {med([g[2] for g in got if g[2] is not None])}"))
        sys.exit(0)
    walls = {b: [] for b in builds}
    clis = {b: [] for b in builds}
    splits = {b: [] for b in builds}
    bares = []
    piped = []
    # A random order each round (seeded, so a rerun takes the same orders): in a
    # fixed rotation each side always follows the same other side, and the run
    # right after a CLI run was seen to be slower, whoever made it.
    order = random.Random(0)
    for _ in range(pairs):
        sides = builds + [None, "piped"]
        order.shuffle(sides)
        for side in sides:
            if side is None:
                bares.append(run_bare())
                continue
            if side == "piped":
                piped.append(run_bare(piped=True))
                continue
            wall, cli, _, _, split = run_specbridge(side)
            walls[side].append(wall)
            clis[side].append(cli)
            splits[side].append(split)
    m = statistics.median

    def less(a, b):
        """`a` less `b`, round by round: mean, its standard error, median."""
        d = [x - y for x, y in zip(a, b)]
        se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else 0.0
        return statistics.fmean(d), se, m(d)

    for b in builds:
        own = m([w - c for w, c in zip(walls[b], clis[b])])
        label = "" if not old else (" (new)" if b == specbridge else " (old)")
        print(f"pairs: {pairs}; earlier runs kept: {len(kept)}; "
              f"{'a fresh HOME each run; ' if os.environ.get('FRESH') else ''}"
              f"{os.environ['TREE'] + ' files in the tree; ' if os.environ.get('TREE') else ''}"
              f"{'after a check stage; ' if os.environ.get('AFTER_CHECK') else ''}"
              f"{'earlier runs deleted; ' if os.environ.get('DELETE') else ''}"
              f"{'syncs made no-ops; ' if os.environ.get('NOSYNC') else ''}specbridge{label} run {m(walls[b]):.0f} ms, bare claude -p "
              f"{m(bares):.0f} ms (medians): {m(walls[b]) / m(bares):.3f}x; specbridge's own "
              f"time {own:.0f} ms (run less the CLI's durationMs, median): "
              f"{m([b for b, _ in splits[b]]):.1f} before the spawn, "
              f"{m([a for _, a in splits[b]]):.1f} after the reap; against a bare call "
              f"whose stdout is a pipe read as it comes ({m(piped):.0f} ms): "
              f"{m(walls[b]) / m(piped):.3f}x; the median of each round's own ratio "
              f"(the two sides of a round ran within a second): "
              f"{m([w / x for w, x in zip(walls[b], bares)]):.3f}x")
        # Each round's two sides ran within a second of each other: their
        # difference leaves out most of what the CLI's own drift adds to both.
        mean, se, median = less(walls[b], bares)
        print(f"  specbridge{label} less the bare call, round by round: mean "
              f"{mean:+.1f} ms ± {se:.1f} (standard error), median "
              f"{median:+.1f} ms; ratio of the means {statistics.fmean(walls[b]) / statistics.fmean(bares):.3f}x")
        # specbridge reads the CLI's stdout from a pipe as it comes; a bare
        # call whose output is read does too, which costs the CLI some time
        # of its own (below).
        mean, se, median = less(walls[b], piped)
        print(f"  specbridge{label} less the piped bare call, round by round: mean "
              f"{mean:+.1f} ms ± {se:.1f}, median {median:+.1f} ms; "
              f"ratio of the means {statistics.fmean(walls[b]) / statistics.fmean(piped):.3f}x")
    mean, se, median = less(piped, bares)
    print(f"the piped bare call less the bare call, round by round: mean "
          f"{mean:+.1f} ms ± {se:.1f}, median {median:+.1f} ms")
    if old:
        # The two builds ran in the same rounds: their difference round by
        # round leaves out what the CLI's own spread adds to both.
        mean, se, median = less(walls[specbridge], walls[old])
        print(f"new less old, round by round: median {median:+.1f} ms, "
              f"mean {mean:+.1f} ms ± {se:.1f} (standard error)")
finally:
    model.kill()
    if os.environ.get("KEEP_SCRATCH"): print("scratch kept:", scratch)
    else: shutil.rmtree(scratch, ignore_errors=True)
