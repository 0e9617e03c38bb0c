#!/usr/bin/env python3
"""Reconcile side by side with pm2 and supervisord, on this machine.

Each supervisor runs the same 20 long-running commands, each of which starts one detached
(setsid) grandchild. The supervisor is killed with SIGKILL and started again the way its users
would (pm2: `pm2 resurrect` after `pm2 save`; supervisord: started again with its config;
Reconcile: `reconcile takeover`). Once it settles we count, from /proc: commands running twice,
processes nobody tracks any more, commands lost; and we measure the supervisor's idle RSS and its
time from start to managing its commands again.

Every process this script starts carries PEERS_TAG=<run id>-...; it touches no other process.
Run: scripts/peers (installs pm2 with npm and supervisor with pip when missing).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

N = 20
RUN = "peers" + uuid.uuid4().hex[:8]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RECONCILE = os.path.join(TARGET, "release", "reconcile")


def script(tool, i):
    tag = f"{RUN}-{tool}-{i}"
    return (f"export PEERS_TAG={tag}; "
            f"PEERS_ROLE=grandchild setsid sleep 86400 >/dev/null 2>&1 </dev/null & "
            f"PEERS_ROLE=main exec sleep 86400")


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return None
    except OSError:
        return None
    return dict(e.decode(errors="replace").split("=", 1) for e in raw if b"=" in e)


def tagged(tool):
    """pid -> (command index, role, environment) of this run's processes for `tool`."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        env = environ(int(name))
        if not env or not env.get("PEERS_TAG", "").startswith(f"{RUN}-{tool}-"):
            continue
        found[int(name)] = (int(env["PEERS_TAG"].rsplit("-", 1)[1]), env.get("PEERS_ROLE"), env)
    return found


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_until(what, check, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise SystemExit(f"peers: timed out waiting for {what}")


def run(*args, env=None, check=True):
    return subprocess.run(args, env=env, check=check, capture_output=True, text=True)


def count(tool, managed):
    procs = tagged(tool)
    mains = {}
    for pid, (i, role, _) in procs.items():
        if role == "main":
            mains.setdefault(i, []).append(pid)
    twice = sum(1 for pids in mains.values() if len(pids) > 1)
    lost = N - len(mains)
    untracked = sum(1 for pid in procs if pid not in managed)
    return twice, untracked, lost


def kill_tagged(tool):
    for pid, _ in tagged(tool).items():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- pm2 ---------------------------------------------------------------------------------------

def pm2(work):
    env = dict(os.environ, PM2_HOME=os.path.join(work, "pm2"))
    apps = [{"name": f"{RUN}-{i}", "script": "/bin/sh", "args": ["-c", script("pm2", i)],
             "interpreter": "none", "autorestart": True} for i in range(N)]
    eco = os.path.join(work, "ecosystem.json")
    with open(eco, "w") as f:
        json.dump({"apps": apps}, f)
    run("pm2", "start", eco, env=env)
    run("pm2", "save", env=env)

    def online():
        out = run("pm2", "jlist", env=env, check=False).stdout
        try:
            procs = json.loads(out[out.index("["):])
        except ValueError:
            return None
        pids = {p["pid"] for p in procs if p["pm2_env"]["status"] == "online" and p["pid"]}
        return pids if len(pids) == N else None

    wait_until("pm2 to run every command", online)
    god = int(open(os.path.join(work, "pm2", "pm2.pid")).read())
    os.kill(god, signal.SIGKILL)
    started = time.monotonic()
    run("pm2", "resurrect", env=env)
    managed = wait_until("pm2 to manage every command again", online)
    settle = time.monotonic() - started
    god = int(open(os.path.join(work, "pm2", "pm2.pid")).read())
    time.sleep(2)  # let it settle before reading its idle memory
    result = count("pm2", managed) + (rss_kib(god), settle)
    run("pm2", "kill", env=env, check=False)
    kill_tagged("pm2")
    return result


# --- supervisord -------------------------------------------------------------------------------

def supervisord(work):
    conf = os.path.join(work, "supervisord.conf")
    sock = os.path.join(work, "supervisor.sock")
    with open(conf, "w") as f:
        f.write(f"[unix_http_server]\nfile={sock}\n[supervisord]\nnodaemon=true\n"
                f"logfile={work}/supervisord.log\npidfile={work}/supervisord.pid\n"
                f"[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = "
                f"supervisor.rpcinterface:make_main_rpcinterface\n"
                f"[supervisorctl]\nserverurl=unix://{sock}\n")
        for i in range(N):
            f.write(f"[program:c{i}]\ncommand=/bin/sh -c \"{script('supervisord', i)}\"\n"
                    f"autorestart=true\nstopasgroup=true\nkillasgroup=true\n")

    def online():
        out = run("supervisorctl", "-c", conf, "status", check=False).stdout
        pids = {int(line.split("pid ")[1].split(",")[0]) for line in out.splitlines() if "RUNNING" in line}
        return pids if len(pids) == N else None

    first = subprocess.Popen(["supervisord", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until("supervisord to run every command", online)
    first.kill()
    first.wait()
    os.unlink(sock) if os.path.exists(sock) else None
    started = time.monotonic()
    second = subprocess.Popen(["supervisord", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    managed = wait_until("supervisord to manage every command again", online)
    settle = time.monotonic() - started
    time.sleep(2)
    result = count("supervisord", managed) + (rss_kib(second.pid), settle)
    run("supervisorctl", "-c", conf, "shutdown", check=False)
    second.wait(timeout=30)
    kill_tagged("supervisord")
    return result


# --- Reconcile ---------------------------------------------------------------------------------

def reconcile(work):
    port = 40000 + os.getpid() % 20000
    env = dict(os.environ, RECONCILE_HOME=os.path.join(work, "home"), RECONCILE_PORT=str(port),
               RECONCILE_TMUX_SOCKET=RUN)
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    run("git", "-C", repo, "init", "-q")
    run("git", "-C", repo, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-q", "--allow-empty", "-m", "i")
    run(RECONCILE, "takeover", env=env)
    for i in range(N):
        run(RECONCILE, "session", "new", "--repo", repo, "--", "sh", "-c", script("reconcile", i), env=env)

    def running():
        out = run(RECONCILE, "session", "ls", "--json", env=env, check=False).stdout
        try:
            sessions = json.loads(out)
        except ValueError:
            return None
        ids = {s["id"] for s in sessions if s["state"] == "running"}
        return ids if len(ids) == N else None

    wait_until("Reconcile to run every command", running)
    run_file = json.load(open(os.path.join(work, "home", "daemon.json")))
    os.kill(run_file["pid"], signal.SIGKILL)
    started = time.monotonic()
    out = json.loads(run(RECONCILE, "takeover", "--json", env=env).stdout)
    ids = wait_until("Reconcile to manage every command again", running)
    settle = time.monotonic() - started
    # Tracked: every process carrying the marker of a running session (grandchildren included).
    managed = {pid for pid, (_, _, e) in tagged("reconcile").items()
               if e.get("RECONCILE_OWNER", "/").split("/", 1)[1] in ids}
    time.sleep(2)
    result = count("reconcile", managed) + (rss_kib(out["pid"]), settle)
    run(RECONCILE, "daemon", "stop", "--stop-sessions", env=env, check=False)
    run("tmux", "-L", RUN, "kill-server", check=False)
    kill_tagged("reconcile")
    return result


def main():
    if not os.path.exists(RECONCILE):
        raise SystemExit(f"peers: {RECONCILE} is missing; run `cargo build --release --workspace` first")
    rows = []
    for name, fn in [("Reconcile", reconcile), ("pm2", pm2), ("supervisord", supervisord)]:
        work = tempfile.mkdtemp(prefix=f"{RUN}-{name}-")
        try:
            rows.append((name,) + fn(work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"peers: {name} done", file=sys.stderr)
    print(f"peers: {N} commands, each with one detached grandchild; supervisor SIGKILLed, then started again")
    print("| supervisor | commands running twice | processes nobody tracks | commands lost | idle RSS | start to managing again |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, twice, untracked, lost, rss, settle in rows:
        print(f"| {name} | {twice} | {untracked} | {lost} | {rss / 1024:.1f} MiB | {settle * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
